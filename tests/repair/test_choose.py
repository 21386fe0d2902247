"""Choosing the submission: tests first, then the vote of the model's own edits."""

from __future__ import annotations

from agentflow.budget import Budget
from agentflow.events import EventLog
from agentflow.repair.choose import choose
from agentflow.repair.config import RepairConfig
from agentflow.repair.policy import Attempt
from agentflow.repair.workbench import Verification


def _attempt(cand: str, patch: str, sample: int, part_of: str | None = None) -> Attempt:
    return Attempt(cand, patch, Verification(kind="test_cmd", passed=None, score=0.5), sample, part_of)


async def test_parts_of_a_split_edit_are_candidates_but_cast_no_vote():
    a = _attempt("t/c1", "diff-a\n", 1)
    b = _attempt("t/c2", "diff-b\n", 2)
    part = _attempt("t/c1.1", "diff-b\n", 1, part_of="t/c1")  # the same change as c2, split out of c1
    best, by = await choose([a, b, part], RepairConfig(vote=True), None, "issue", Budget(), EventLog())
    # one sample each: a tie the earliest sample wins; counting the part, c2's patch would have won 2 to 1
    assert best is a and by == "tests"
    better = Attempt("t/c1.2", "diff-c\n", Verification(kind="test_cmd", passed=True, score=1.0), 1, "t/c1")
    best, by = await choose([a, b, part, better], RepairConfig(vote=True), None, "issue", Budget(), EventLog())
    assert best is better and by == "tests"  # a part that passes is chosen by the tests like any candidate
