"""Siblings of a search choose apart (`tree.spread`): whatever their pick prefers, the children of one state
take distinct options while distinct ones remain."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence

import pytest

from agentflow.graph.search.tree import spread


def first(options: Sequence[str]) -> str:
    return options[0]


def last(options: Sequence[str]) -> str:
    return options[-1]


@pytest.mark.parametrize("pick", [first, last])
def test_siblings_take_distinct_keys_while_distinct_ones_remain(pick) -> None:
    rng = random.Random(7)
    for length in range(1, 7):
        for _ in range(40):
            options = [f"{rng.choice('abcdef')}:{rng.randint(0, 3)}" for _ in range(length)]
            keys = {o.split(":")[0] for o in options}
            for siblings in range(1, 9):
                taken = [spread(s, options, pick, key=lambda o: o.split(":")[0]) for s in range(siblings)]
                taken_keys = [t.split(":")[0] for t in taken]
                # the first len(keys) siblings take every key once; later ones start a new round
                head = taken_keys[: len(keys)]
                assert len(set(head)) == len(head), (options, siblings, taken)
                assert set(taken_keys) == keys if siblings >= len(keys) else len(set(taken_keys)) == siblings


def test_avoided_keys_are_taken_last() -> None:
    options = ["a", "b", "c"]
    assert [spread(s, options, first, avoid={"a"}) for s in range(3)] == ["b", "c", "a"]
    # every option avoided: the avoidance gives way
    assert spread(0, options, first, avoid=set(options)) == "a"


def test_the_pick_is_asked_once_per_earlier_sibling_and_sees_only_free_options() -> None:
    seen: list[list[str]] = []

    def record(options: Sequence[str]) -> str:
        seen.append(list(options))
        return options[0]

    assert spread(2, ["x", "y", "z"], record) == "z"
    assert seen == [["x", "y", "z"], ["y", "z"], ["z"]]
    with pytest.raises(ValueError, match="no options"):
        spread(0, [], first)


def test_duplicates_by_key_count_as_one_option() -> None:
    options = ["f.py:g@1", "f.py:g@40", "f.py:h@9"]
    key = lambda o: o.split("@")[0]
    assert [key(spread(s, options, first, key=key)) for s in range(3)] == ["f.py:g", "f.py:h", "f.py:g"]
    assert list(itertools.islice((spread(s, ["one"], first) for s in itertools.count()), 3)) == ["one"] * 3
