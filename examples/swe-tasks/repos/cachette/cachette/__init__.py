"""cachette: in-memory LRU and TTL caches."""

from cachette.clock import ManualClock, MonotonicClock
from cachette.lru import LRUCache
from cachette.memo import memoize
from cachette.stats import CacheStats
from cachette.ttl import TTLCache

__all__ = ["CacheStats", "LRUCache", "ManualClock", "MonotonicClock", "TTLCache", "memoize"]
__version__ = "0.9.0"
