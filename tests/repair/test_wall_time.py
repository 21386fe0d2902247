"""A repair task's `--wall-time` ends it at the deadline: the model call in flight (a real, slow
OpenAI-compatible server on loopback) is cut, the task ends `limits_exceeded` (limit `wall_seconds`) with the best
candidate verified so far submitted, and its events, checkpoints and candidates are kept."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentflow.cli.main import run
from agentflow.events import EventLog, read_events
from agentflow.events.kinds import LimitReached, RepairEnd, RepairStatus

from ..models.conftest import FakeServer, fake_server_process
from .conftest import CASSETTES, TASKS_FILE, read_jsonl

WALL_S = 30
"""Time for the task's set-up and its first three model calls (about 4 s on an idle machine, 3 times that on a
busy one), not for the fourth."""


@pytest.fixture
def llm() -> Iterator[FakeServer]:
    with fake_server_process() as server:
        yield server


def test_wall_time_cuts_the_call_in_flight_and_submits_the_best_so_far(llm: FakeServer, tmp_path: Path) -> None:
    # the replies of a scripted repair: the ranking, an edit that changes nothing, a wrong edit, then the fix
    # — which comes far too late
    replies = [i["response"]["choices"][0]["message"]["content"]
               for i in json.loads((CASSETTES / "single_inikit-1.json").read_text())["interactions"]]
    llm.script(*({"content": text} for text in replies[:3]), {"content": replies[3], "delay": 120})
    out = tmp_path / "run"
    code = run(["repair", "--tasks", str(TASKS_FILE), "-i", "inikit__inikit-1", "--sandbox", "local",
                "--model", llm.spec("coder"), "--wall-time", f"{WALL_S}s", "-o", str(out),
                "-c", "search.concurrency=1", "-c", "edit.format=search_replace", "-c", "tests.feedback=task", "-c", "mutants=false"])
    assert code == 1  # not `submitted`: the status says which limit ended the task
    inst = out / "instances" / "inikit__inikit-1"
    outcome = json.loads((inst / "outcome.json").read_text())
    assert (outcome["status"], outcome["limit"]) == ("limits_exceeded", "wall_seconds"), outcome.get("error")
    assert outcome["duration_s"] < WALL_S + 10, "the 120 s call was not cut"
    assert len(llm.requests()) == 4  # the fourth call was made, then cut
    # the best candidate verified before the deadline (the wrong edit: nothing better came) is submitted
    candidates = read_jsonl(inst / "candidates.jsonl")
    assert [c["status"] for c in candidates] == ["noop", "ok"]
    assert outcome["model_patch"] == candidates[1]["patch"] and outcome["chosen"] == candidates[1]["candidate_id"]
    assert outcome["chosen_by"] == "best_so_far"  # the choice itself (and its grading) was cut
    assert (inst / "patch.diff").read_text() == outcome["model_patch"]
    assert (inst / "checkpoints.db").is_file()
    assert read_jsonl(out / "preds.jsonl")[0]["model_patch"] == outcome["model_patch"]
    events = list(read_events(out / "events.jsonl"))
    assert any(isinstance(e, LimitReached) and e.limit == "wall_seconds" for e in events)
    assert [(e.status, e.limit) for e in events if isinstance(e, RepairEnd)] == [("limits_exceeded", "wall_seconds")]



@pytest.mark.parametrize("noops", [True, False])
def test_a_task_cut_at_its_deadline_never_submits_a_change_of_no_code_when_the_tests_fail_at_the_base(
        llm: FakeServer, tmp_path: Path, noops: bool) -> None:
    """cachette-1, verified by its own tests, which fail at the base commit: the first attempt rewords a docstring,
    the next (on top of it) writes the look-alike, then the deadline cuts the call in flight. The choice that
    follows is cut while it grades the look-alike; of the best so far, neither passes and the docstring is the
    smaller patch, but it changes no code, so it cannot be the fix: the look-alike is submitted. When the
    docstring is all there is, nothing is submitted, whether the choice (which submits nothing) ends before the
    cut or not: the best so far is not taken after a choice, and is no noop either."""
    from .test_repair_e2e import COMMENT, DOCSTRING, LOOKALIKE

    answers = [DOCSTRING] if noops else [DOCSTRING, LOOKALIKE]
    llm.script(*({"content": text} for text in answers), {"content": COMMENT, "delay": 120})
    out = tmp_path / "run"
    code = run(["repair", "--tasks", str(TASKS_FILE), "-i", "cachette__cachette-1", "--sandbox", "local",
                "--model", llm.spec("coder"), "--wall-time", f"{WALL_S}s", "-o", str(out),
                "-c", "search.concurrency=1", "-c", "edit.format=search_replace", "-c", "tests.feedback=task", "-c", "mutants=false",
                "-c", "rank=false", "-c", "spectrum=false"])
    assert code == 1
    inst = out / "instances" / "cachette__cachette-1"
    outcome = json.loads((inst / "outcome.json").read_text())
    assert (outcome["status"], outcome["limit"]) == ("limits_exceeded", "wall_seconds"), outcome.get("error")
    assert len(llm.requests()) == len(answers) + 1  # the last call was made, then cut
    candidates = read_jsonl(inst / "candidates.jsonl")
    assert [c["status"] for c in candidates] == ["ok"] * len(answers)
    assert outcome["base_failed"] is True
    left_out = [(e["data"]["left_out"], e["data"]["among"]) for e in read_jsonl(out / "events.jsonl")
                if e["kind"] == "repair.noop"]
    if noops:
        assert (outcome["chosen"], outcome["chosen_by"], outcome["model_patch"]) == (None, "noop", "")
        assert left_out and set(left_out) == {(1, 1)}  # the choice's, or the best so far's when it was cut
        return
    assert len(candidates[0]["patch"]) < len(candidates[1]["patch"])
    assert outcome["chosen"] == candidates[1]["candidate_id"] and outcome["chosen_by"] == "best_so_far"
    assert outcome["model_patch"] == candidates[1]["patch"] and "move_to_end(key)" in outcome["model_patch"]
    assert outcome["noop"] is False and left_out and set(left_out) == {(1, 2)}


async def test_of_candidates_that_change_no_code_the_best_so_far_is_none() -> None:
    """cachette-1 in a real sandbox, its tests failing at the base commit, cut before any choice with two
    candidates verified: a reworded docstring and a comment. Neither changes code: nothing is submitted, and the
    outcome says why."""
    from agentflow.repair.config import load_repair_config
    from agentflow.repair.outcome import Candidate, InstanceOutcome
    from agentflow.repair.run.solve import _python_for, _submit_best_so_far
    from agentflow.repair.verify.workbench import Verification, Workbench
    from agentflow.sandbox import open_sandbox
    from agentflow.swe.tasks import load_tasks

    task = next(t for t in load_tasks(TASKS_FILE) if t.instance_id == "cachette__cachette-1")
    cfg = load_repair_config(["backend=local", "tests.feedback=task"])
    events = EventLog()
    async with open_sandbox("local", cfg.sandbox) as sandbox:
        bench = Workbench(sandbox, task, cfg, _python_for(sandbox))
        await bench.setup()
        base = await bench.verify_base()
        assert base.passed is False
        source = await sandbox.read_file("cachette/lru.py")
        patches = []
        for old, new in (('"""Keys from least to most recently used."""', '"""The keys, least recently used first."""'),
                         ("self.stats.hits += 1\n", "self.stats.hits += 1  # counted first\n")):
            await sandbox.write_file("cachette/lru.py", source.replace(old, new))
            patches.append((await bench.diff())[0])
            await bench.reset()
        failing = Verification(kind="task_tests", passed=False, score=10 / 11)
        rows = [Candidate(instance_id=task.instance_id, candidate_id=f"{task.instance_id}/c{i}", parent_id=None,
                          status="ok", patch=patch, verification=failing, sample=i) for i, patch in enumerate(patches)]
        outcome = InstanceOutcome(instance_id=task.instance_id, status=RepairStatus.LIMITS_EXCEEDED,
                                  limit="wall_seconds")
        await _submit_best_so_far(outcome, rows, bench, {"base": base}, events)
    assert all(p.startswith("diff --git a/cachette/lru.py") for p in patches)
    assert (outcome.model_patch, outcome.chosen, outcome.chosen_by) == ("", None, "noop")
    assert outcome.base_failed is True
    assert [(e.data["left_out"], e.data["among"]) for e in events.events if e.kind == "repair.noop"] == [(2, 2)]
