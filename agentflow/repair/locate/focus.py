"""Which suspect an edit sample looks at first: the ranked windows share a search's samples (`ROTATION`), and a
window the model left alone (gave back unchanged, or answered with other code) is more likely correct code than
the fault, so its share is turned down (`DECLINE_FACTOR` per such answer) for the suspects not yet looked at.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from agentflow.repair.locate.localize import Window

ROTATION = (0, 1, 0, 2, 0, 1, 0, 3)
"""Which suspect a sample looks at first: the top-ranked one half the time, the others in turn."""
DECLINE_FACTOR = 0.3
"""A window's share of the samples is multiplied by this for each answer that declined it (gave it back
unchanged, or other code): about the ratio of how often a model gives the faulty function back unchanged to
how often it does so with correct code (docs/measurements/mechanisms.md)."""


def rotated(windows: Sequence[Window], focus: int) -> list[Window]:
    """`windows` with the one the `focus`-th sample looks at first (`ROTATION`) moved to the front."""
    if not windows:
        return []
    first = ROTATION[focus % len(ROTATION)] % len(windows)
    return [*windows[first:], *windows[:first]]


def shares(count: int) -> list[float]:
    """The share of the samples each of `count` ranked windows gets from `ROTATION`."""
    if count <= 0:
        return []
    hits = Counter(r % count for r in ROTATION)
    return [hits[i] / len(ROTATION) for i in range(count)]


def window_key(window: Window) -> str:
    """A window's identity across states of the search (its lines move when an earlier edit changes the file):
    `path:Class.method`, or `path:START-END` for lines outside a function."""
    return f"{window.path}:{window.symbol or f'{window.start}-{window.end}'}"


class FocusSchedule:
    """The windows' shares of one search's samples, learning from the answers (see the module docstring): `pick`
    chooses the window with the largest share left (ties to the better ranked), `ROTATION`'s while nothing was
    declined."""

    def __init__(self, decline_factor: float = DECLINE_FACTOR) -> None:
        self.decline_factor = decline_factor
        self.shown: Counter[str] = Counter()
        """Samples sent to each window (by `window_key`)."""
        self.declined: Counter[str] = Counter()
        """Answers that declined each window (gave it back unchanged, or answered with other code)."""

    def pick(self, windows: Sequence[Window], samples: int = 1) -> list[Window]:
        """`windows` (ranked, best first) with the one the next `samples` samples rewrite moved to the front;
        those samples are counted as sent to it."""
        if not windows:
            return []
        weights = shares(len(windows))

        def left(item: tuple[int, Window]) -> tuple[float, int]:
            i, window = item
            key = window_key(window)
            return (-(weights[i] * self.decline_factor ** self.declined[key]) / (self.shown[key] + 1), i)

        i, chosen = min(enumerate(windows), key=left)
        self.shown[window_key(chosen)] += samples
        return [chosen, *windows[:i], *windows[i + 1:]]

    def decline(self, window: Window) -> None:
        """An answer left `window` alone: gave it back unchanged, or answered with other code than its function."""
        self.declined[window_key(window)] += 1
