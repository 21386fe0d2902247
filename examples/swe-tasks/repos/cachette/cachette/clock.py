"""Clocks: where caches get the current time from."""

import time


class MonotonicClock:
    def now(self):
        return time.monotonic()


class ManualClock:
    """A clock that only moves when told to (for tests and simulations)."""

    def __init__(self, start=0.0):
        self._now = float(start)

    def now(self):
        return self._now

    def advance(self, seconds):
        self._now += seconds
