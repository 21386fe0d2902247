import pytest

from cachette import LRUCache


def test_set_and_get():
    cache = LRUCache(2)
    cache.set("a", 1)
    assert cache.get("a") == 1
    assert cache.get("b", "dflt") == "dflt"


def test_evicts_oldest_when_full():
    cache = LRUCache(2)
    cache.set("a", 1)
    cache.set("b", 2)
    cache.set("c", 3)
    assert "a" not in cache
    assert cache.keys() == ["b", "c"]
    assert cache.stats.evictions == 1


def test_set_existing_key_refreshes_it():
    cache = LRUCache(2)
    cache.set("a", 1)
    cache.set("b", 2)
    cache.set("a", 10)
    cache.set("c", 3)
    assert cache.keys() == ["a", "c"]
    assert cache.get("a") == 10


def test_maxsize_must_be_positive():
    with pytest.raises(ValueError):
        LRUCache(0)


def test_stats_count_hits_and_misses():
    cache = LRUCache(4)
    cache.set("a", 1)
    cache.get("a")
    cache.get("a")
    cache.get("zzz")
    assert (cache.stats.hits, cache.stats.misses) == (2, 1)
    assert cache.stats.hit_rate == pytest.approx(2 / 3)
