"""Which suspect each edit sample rewrites: the rotation's shares, turned down for windows given back unchanged."""

from __future__ import annotations

import copy
import random
from collections import Counter

from agentflow.repair.locate.focus import ROTATION, FocusSchedule, rotated, shares, window_key
from agentflow.repair.locate.localize import Window
from agentflow.repair.nodetypes.rollout import suspect_order

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


def partitions(length: int) -> list[list[int]]:
    """Every way `length` windows can share functions: the i-th window is function number p[i]."""
    out = [[0]]
    for _ in range(length - 1):
        out = [p + [k] for p in out for k in range(max(p) + 2)]
    return out


def generated_suspects() -> list[tuple[list[Window], FocusSchedule]]:
    """Suspect lists of lengths 1 to 6, in every pattern of windows sharing a function (a long function's two
    windows) and of functions sharing a file, each with a schedule fresh, or having shown and declined some."""
    rng = random.Random(3)
    cases = []
    for length in range(1, 7):
        for pattern in partitions(length):
            files = [f"pkg/m{rng.randint(0, 2)}.py" for _ in range(max(pattern) + 1)]
            windows = [Window(files[f], 10 * i + 1, 10 * i + 8, 6.0 - i, f"fn{f}") for i, f in enumerate(pattern)]
            for history in range(3):
                schedule = FocusSchedule()
                for window in rng.sample(windows, k=min(history, len(windows))):
                    schedule.shown[window_key(window)] += rng.randint(1, 3)
                    if history == 2:
                        schedule.decline(window)
                cases.append((windows, schedule))
    return cases


def test_concurrent_branches_start_from_distinct_suspects_whenever_the_list_allows():
    """Branches that start from one state (each with its copy of the state's schedule) are the search's
    siblings 0, 1, ...: the first suspects of the first k are distinct whenever k distinct suspects exist."""
    cases = generated_suspects()
    assert len(cases) > 800
    for windows, schedule in cases:
        distinct = {window_key(w) for w in windows}
        for branches in range(1, 9):
            firsts = [window_key(suspect_order(copy.deepcopy(schedule), windows, s)[0]) for s in range(branches)]
            head = firsts[: len(distinct)]
            assert len(set(head)) == len(head), (windows, dict(schedule.shown), firsts)
            # every window stays in the prompt's list, the chosen one first
            order = suspect_order(copy.deepcopy(schedule), windows, branches - 1)
            assert sorted(map(window_key, order)) == sorted(map(window_key, windows))


def test_the_first_branch_takes_the_schedules_own_pick_and_the_pick_is_counted():
    for windows, schedule in generated_suspects()[::7]:
        expected = copy.deepcopy(schedule).pick(windows)[0]
        counted = copy.deepcopy(schedule)
        assert suspect_order(counted, windows, 0)[0] == expected
        assert counted.shown[window_key(expected)] == schedule.shown[window_key(expected)] + 1
