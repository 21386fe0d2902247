"""Which suspect each edit sample rewrites: the rotation's shares, turned down for windows given back unchanged."""

from __future__ import annotations

from collections import Counter

from agentflow.repair.locate.focus import ROTATION, FocusSchedule, rotated, shares
from agentflow.repair.locate.localize import Window

WINDOWS = [Window("pkg/a.py", 1, 10, 3.0, "top"), Window("pkg/a.py", 20, 30, 2.0, "second"),
           Window("pkg/b.py", 1, 10, 1.0, "third"), Window("pkg/c.py", 1, 10, 0.5, "fourth")]


def firsts(schedule: FocusSchedule, count: int, windows: list[Window] = WINDOWS) -> list[str]:
    return [schedule.pick(windows)[0].symbol for _ in range(count)]


def test_with_nothing_declined_the_samples_follow_the_rotations_shares():
    for count in (1, 2, 3, 4):
        windows = WINDOWS[:count]
        picked = Counter(firsts(FocusSchedule(), len(ROTATION), windows))
        rotation = Counter(rotated(windows, focus)[0].symbol for focus in range(len(ROTATION)))
        assert picked == rotation, count
    assert shares(4) == [0.5, 0.25, 0.125, 0.125]
    # the best-ranked window is looked at first
    assert firsts(FocusSchedule(), 1) == ["top"]


def test_a_picked_window_comes_first_and_the_others_keep_their_order():
    schedule = FocusSchedule()
    schedule.shown["pkg/a.py:top"] = 10  # the top window had its share
    order = [w.symbol for w in schedule.pick(WINDOWS)]
    assert order == ["second", "top", "third", "fourth"]


def test_a_window_given_back_unchanged_gets_fewer_of_the_next_samples():
    plain = Counter(firsts(FocusSchedule(), 16))
    schedule = FocusSchedule()
    assert schedule.pick(WINDOWS)[0].symbol == "top"
    schedule.decline(WINDOWS[0])
    # the next samples go to the other suspects (by their shares) before the top one comes back
    following = firsts(schedule, 4)
    assert following == ["second", "second", "third", "fourth"]
    declined = Counter(["top", *following, *firsts(schedule, 11)])  # the same 16 samples
    assert declined["top"] <= plain["top"] - 3
    assert declined["second"] > plain["second"] and declined["third"] > plain["third"]


def test_declines_follow_the_function_when_its_lines_move():
    """A window is the same suspect in a later state of the search, where an earlier edit moved its lines."""
    schedule = FocusSchedule()
    schedule.decline(WINDOWS[0])
    schedule.decline(WINDOWS[0])
    moved = [Window("pkg/a.py", 4, 13, 3.0, "top"), *WINDOWS[1:]]
    assert schedule.pick(moved)[0].symbol == "second"


def test_once_every_window_was_declined_alike_the_rotation_resumes():
    schedule = FocusSchedule()
    for window in WINDOWS:
        schedule.decline(window)
    assert Counter(firsts(schedule, 8)) == Counter(firsts(FocusSchedule(), 8))


def test_a_batch_of_samples_counts_once_per_sample():
    schedule = FocusSchedule()
    assert schedule.pick(WINDOWS, samples=4)[0].symbol == "top"
    assert schedule.shown["pkg/a.py:top"] == 4
    assert schedule.pick(WINDOWS)[0].symbol == "second"
