"""Least-recently-used cache."""

from collections import OrderedDict

from cachette.stats import CacheStats

_MISSING = object()


class LRUCache:
    """Keeps at most `maxsize` entries; adding one more evicts the least recently used."""

    def __init__(self, maxsize=128):
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self.maxsize = maxsize
        self._data = OrderedDict()
        self.stats = CacheStats()

    def __len__(self):
        return len(self._data)

    def __contains__(self, key):
        return key in self._data

    def get(self, key, default=None):
        value = self._data.get(key, _MISSING)
        if value is _MISSING:
            self.stats.misses += 1
            return default
        self.stats.hits += 1
        return value

    def set(self, key, value):
        if key in self._data:
            self._data.move_to_end(key)
        self._data[key] = value
        while len(self._data) > self.maxsize:
            self._data.popitem(last=False)
            self.stats.evictions += 1

    def delete(self, key):
        return self._data.pop(key, _MISSING) is not _MISSING

    def clear(self):
        self._data.clear()

    def keys(self):
        """Keys from least to most recently used."""
        return list(self._data)
