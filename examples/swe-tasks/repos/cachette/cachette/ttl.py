"""Cache whose entries expire after a time-to-live."""

from cachette.clock import MonotonicClock
from cachette.lru import LRUCache

_MISSING = object()


class TTLCache:
    """An LRU cache whose entries expire `ttl` seconds after they were set (`ttl=None`: never)."""

    def __init__(self, maxsize=128, ttl=None, clock=None):
        if ttl is not None and ttl < 0:
            raise ValueError("ttl must be >= 0 or None")
        self.ttl = ttl
        self.clock = clock or MonotonicClock()
        self._lru = LRUCache(maxsize)
        self.stats = self._lru.stats

    def __len__(self):
        return len(self._lru)

    def _expired(self, expires_at):
        return expires_at is not None and self.clock.now() >= expires_at

    def get(self, key, default=None):
        entry = self._lru.get(key, _MISSING)
        if entry is _MISSING:
            return default
        value, expires_at = entry
        if self._expired(expires_at):
            self._lru.delete(key)
            # the LRU counted a hit; an expired entry is a miss
            self.stats.hits -= 1
            self.stats.misses += 1
            return default
        return value

    def set(self, key, value, ttl=_MISSING):
        ttl = self.ttl if ttl is _MISSING else ttl
        expires_at = None if ttl is None else self.clock.now() + ttl
        self._lru.set(key, (value, expires_at))

    def delete(self, key):
        return self._lru.delete(key)

    def clear(self):
        self._lru.clear()
