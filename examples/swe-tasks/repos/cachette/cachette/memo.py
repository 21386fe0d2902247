"""`memoize`: cache a function's results by its arguments."""

import functools

from cachette.ttl import TTLCache

_MISSING = object()


def make_key(args, kwargs):
    return (args, tuple(sorted(kwargs.items()))) if kwargs else (args,)


def memoize(maxsize=128, ttl=0, clock=None):
    """Decorator: results are cached by arguments; `ttl` seconds of validity (None: forever)."""

    def decorate(func):
        cache = TTLCache(maxsize=maxsize, ttl=ttl, clock=clock)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            key = make_key(args, kwargs)
            value = cache.get(key, _MISSING)
            if value is _MISSING:
                value = func(*args, **kwargs)
                cache.set(key, value)
            return value

        wrapper.cache = cache
        wrapper.cache_clear = cache.clear
        return wrapper

    return decorate
