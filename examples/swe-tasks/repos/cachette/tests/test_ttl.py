from cachette import ManualClock, TTLCache, memoize


def test_entry_expires_after_ttl():
    clock = ManualClock()
    cache = TTLCache(ttl=10, clock=clock)
    cache.set("k", "v")
    clock.advance(9.5)
    assert cache.get("k") == "v"
    clock.advance(0.5)
    assert cache.get("k") is None


def test_ttl_none_never_expires():
    clock = ManualClock()
    cache = TTLCache(ttl=None, clock=clock)
    cache.set("k", "v")
    clock.advance(10**9)
    assert cache.get("k") == "v"


def test_per_entry_ttl_overrides_default():
    clock = ManualClock()
    cache = TTLCache(ttl=100, clock=clock)
    cache.set("short", 1, ttl=1)
    clock.advance(2)
    assert cache.get("short") is None


def test_expired_lookup_counts_as_miss():
    clock = ManualClock()
    cache = TTLCache(ttl=1, clock=clock)
    cache.set("k", "v")
    clock.advance(5)
    cache.get("k")
    assert (cache.stats.hits, cache.stats.misses) == (0, 1)


def test_memoize_with_ttl_caches_until_expiry():
    clock = ManualClock()
    calls = []

    @memoize(ttl=30, clock=clock)
    def square(x):
        calls.append(x)
        return x * x

    assert square(4) == 16
    assert square(4) == 16
    assert calls == [4]
    clock.advance(31)
    assert square(4) == 16
    assert calls == [4, 4]
