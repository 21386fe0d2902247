"""A task's candidates are its state's (`state.task_candidates`), and candidates.jsonl is written from them
(`run.candidates_file`); a resumed task's come from its checkpoints (the kill -9 tests: test_resume_nodes.py,
test_repair_search_resume.py)."""

from __future__ import annotations

import json
from pathlib import Path

from agentflow.repair.nodetypes.state import task_candidates
from agentflow.repair.outcome import Candidate
from agentflow.repair.run.candidates_file import FILE, write_candidates
from agentflow.repair.verify.workbench import Verification


def _cand(cid: str, sample: int, *, status: str = "ok", score: float = 0.5, part_of: str | None = None) -> Candidate:
    return Candidate(instance_id="t", candidate_id=f"t/{cid}", parent_id="t/root", status=status,  # type: ignore[arg-type]
                     patch=f"diff {cid}\n", sample=sample, part_of=part_of,
                     verification=Verification(passed=False, score=score) if status == "ok" else None)


def test_the_tasks_candidates_are_every_one_in_the_state_in_the_order_drawn_each_once() -> None:
    b0_1, b0_2 = _cand("b0.1", 101, status="noop"), _cand("b0.2", 102)
    part = _cand("b0.2.1", 102, part_of="t/b0.2")
    b1_1 = _cand("b1.1", 201)
    # a search gathers every branch's lists; a child branch's lists start as its parent's, and the value agent's
    # copy of a candidate (its value set) is the same candidate
    state = {"attempts": [b1_1, part, b0_2, b0_2.model_copy(update={"value": 0.9})], "resampled": [b0_1]}
    assert [c.candidate_id for c in task_candidates(state)] == ["t/b0.1", "t/b0.2", "t/b0.2.1", "t/b1.1"]
    # a search cut before it gathered: the workflow's state has none of them, its branches' states have them
    branches = [{"attempts": [b0_2, part], "resampled": [b0_1]}, {"attempts": [b1_1]}]
    assert task_candidates({}, *branches) == task_candidates(state)
    assert task_candidates({}) == []


def test_a_row_has_the_fields_it_always_had(tmp_path: Path) -> None:
    write_candidates(tmp_path, [_cand("b0.1", 101).model_copy(update={"value": 0.7, "assessment": "close"})])
    (row,) = [json.loads(line) for line in (tmp_path / FILE).read_text().splitlines()]
    assert set(row) == {"instance_id", "candidate_id", "parent_id", "status", "patch", "dropped_test_files",
                        "edit_errors", "verification", "finish_reason", "sample", "answer", "window", "approach",
                        "part_of"}
    write_candidates(tmp_path, [])  # replaced whole
    assert (tmp_path / FILE).read_text() == ""


def test_a_resumed_task_knows_a_candidate_of_its_killed_run_passed_from_the_runs_events(tmp_path: Path) -> None:
    """`stop_on_success` across a kill: the resumed task's edits draw no new sample once a candidate of the run
    it continues passed, as its `repair.candidate` events in the run's events file say."""
    from agentflow.events import EventLog
    from agentflow.repair.nodetypes.runtime import candidate_event
    from agentflow.repair.run.solve import _passed_before

    passing = _cand("b1.1", 201).model_copy(update={"verification": Verification(passed=True, score=1.0)})
    with EventLog(tmp_path / "events.jsonl") as events:
        assert not _passed_before(events, "t")  # nothing recorded yet
        events.write(candidate_event(_cand("b0.1", 101)))
        events.write(candidate_event(passing.model_copy(update={"instance_id": "other"})))
        assert not _passed_before(events, "t")  # a failing candidate, and another task's that passed
        events.write(candidate_event(passing))
        assert _passed_before(events, "t")
    assert not _passed_before(EventLog(), "t")  # a run without an events file has no earlier run to continue
