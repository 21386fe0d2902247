"""A task's candidates are its state's (`state.task_candidates`), and candidates.jsonl is written from them
(`solve.write_candidates`); a resumed task's come from its checkpoints (the kill -9 tests: test_resume_nodes.py,
test_repair_search_resume.py), and so does whether a candidate of the task passed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

from agentflow.cli.main import run
from agentflow.graph.persist.checkpoint import AgentflowSaver
from agentflow.graph.run.history import root_config
from agentflow.models.base import ChatRequest
from agentflow.repair.nodetypes.state import checkpointed_candidates, solved, task_candidates
from agentflow.repair.outcome import Candidate
from agentflow.repair.run.solve import CANDIDATES_FILE, write_candidates
from agentflow.repair.verify.workbench import Verification

from .conftest import TASKS_FILE, read_jsonl

FIX = ('inikit/parser.py\n<<<<<<< SEARCH\n        parts = stripped.split("=")\n=======\n'
       '        parts = stripped.split("=", 1)\n>>>>>>> REPLACE\nEND_EDITS')


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
    (row,) = [json.loads(line) for line in (tmp_path / CANDIDATES_FILE).read_text().splitlines()]
    assert set(row) == {"instance_id", "candidate_id", "parent_id", "status", "patch", "dropped_test_files",
                        "edit_errors", "verification", "finish_reason", "sample", "answer", "window", "approach",
                        "part_of", "mutant"}
    write_candidates(tmp_path, [])  # replaced whole
    assert (tmp_path / CANDIDATES_FILE).read_text() == ""


async def _checkpoint(saver: AgentflowSaver, thread: str, values: dict[str, Any]) -> None:
    checkpoint = empty_checkpoint()
    versions = {key: saver.get_next_version(None) for key in values}
    checkpoint["channel_values"], checkpoint["channel_versions"] = dict(values), dict(versions)
    await saver.aput(root_config(thread), checkpoint, {}, versions)  # type: ignore[arg-type]


async def test_whether_the_task_is_solved_is_what_its_checkpoints_hold(tmp_path: Path) -> None:
    """`stop_on_success` with no record of the run outside its checkpoints: a candidate that passed in any thread
    of the task (a concurrent branch's, a killed run's) is found by the newest checkpoint of that thread."""
    passing = _cand("b1.1", 201).model_copy(update={"verification": Verification(passed=True, score=1.0)})
    with AgentflowSaver(tmp_path / "checkpoints.db", allowed_types=[Candidate, Verification]) as saver:
        assert await checkpointed_candidates(saver) == []
        await _checkpoint(saver, "repair", {"issue": "x"})
        await _checkpoint(saver, "repair~search~b0", {"attempts": [_cand("b0.1", 101)]})
        await _checkpoint(saver, "repair~search~b0", {"attempts": [_cand("b0.1", 101), _cand("b0.2", 102)]})
        await _checkpoint(saver, "repair~search~b1", {"resampled": [_cand("b1.1", 201, status="noop")]})
        found = await checkpointed_candidates(saver)
        assert [c.candidate_id for c in found] == ["t/b0.1", "t/b0.2", "t/b1.1"] and not solved(found)
        await _checkpoint(saver, "repair~search~b0~b2", {"attempts": [passing]})
        assert solved(await checkpointed_candidates(saver))


def _fixes(request: ChatRequest) -> str:
    return FIX


def test_branches_draw_no_sample_once_a_candidate_of_the_task_passed(tmp_path: Path) -> None:
    """best-of-3, one branch at a time: the first branch's edit passes, so the others find it in its checkpoint
    and draw nothing (`stop_on_success`)."""
    out = tmp_path / "run"
    assert run(["repair", "--tasks", str(TASKS_FILE), "-i", "inikit__inikit-1", "--sandbox", "local", "-o", str(out),
                "--model", "function:tests.repair.test_task_candidates:_fixes", "-c", "rank=false",
                "-c", "spectrum=false", "-c", "reproduce=false", "-c", "edit.format=search_replace", "-c", "tests.feedback=task", "-c", "mutants=false",
                "--strategy", "best_of_n", "-n", "3", "-c", "search.concurrency=1"]) == 0
    events = read_jsonl(out / "events.jsonl")
    assert sum(1 for e in events if e["kind"] == "model.call") == 1
    cands = read_jsonl(out / "instances" / "inikit__inikit-1" / "candidates.jsonl")
    assert [(c["candidate_id"], c["verification"]["passed"]) for c in cands] == [("inikit__inikit-1/b0.1", True)]
