"""Codemonkeys' trajectories are the branches of a graph search (`workflows/codemonkeys.yaml`): each runs in its
own fork of the task's workspace with its own checkpoints, shows in the run's search events, and a run killed
inside the search resumes it, running only the trajectories that had not finished. In the local sandbox (a
real one: the scripts and the tests run in it), with recorded or scripted model answers served one at a time
(`search.concurrency=1`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentflow.cli.main import run
from tests.models.conftest import FakeServer, fake_server_process
from tests.swe_fixtures import kill_9_when

from .conftest import CASSETTES, ROOT, TASKS_FILE, ran_in, read_jsonl, short

IID = "inikit__inikit-1"


def _argv(out: Path, model: str, *extra: str) -> list[str]:
    return ["repair", "--tasks", str(TASKS_FILE), "-i", IID, "--workflow", "codemonkeys", "--model", model,
            "--sandbox", "local", "-c", "search.concurrency=1", "-c", "edit.format=search_replace",
            *extra, "-o", str(out)]


def _branch_events(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(what happened, branch) of the trajectories search's `search.branch` events."""
    return [(e["data"]["event"], e["node_id"].rsplit("/", 1)[1]) for e in events if e["kind"] == "search.branch"]


def test_each_trajectory_is_a_branch_in_its_own_workspace_and_the_vote_chooses_as_before(tmp_path: Path) -> None:
    """The recorded answers of `test_codemonkeys_trajectories_write_tests_that_decide_the_vote` (whose votes,
    finalists and choice were those of the trajectories run side by side outside the engine): the three
    trajectories are branches b0-b2 of the `trajectories` search, each running its one node; each branch's
    workspace diff is its trajectory's candidate; the vote and the selection come out as they did."""
    out = tmp_path / "run"
    model = f"replay:{CASSETTES / 'workflows' / 'codemonkeys_inikit-1.json'}"
    assert run(_argv(out, model, "-c", "nodes.trajectory.turns=2")) == 0
    events = read_jsonl(out / "events.jsonl")
    assert _branch_events(events) == [("start", "b0"), ("end", "b0"), ("start", "b1"), ("end", "b1"),
                                      ("start", "b2"), ("end", "b2")]
    assert all(ran_in(events, b, "trajectories") == ["trajectory"] for b in ("b0", "b1", "b2"))
    turns = [(e["data"]["branch"], e["data"]["trajectory"], e["data"]["turn"]) for e in events
             if e["kind"] == "repair.trajectory_turn"]
    assert turns == [("b0", 0, 0), ("b1", 1, 0), ("b2", 2, 0)]  # each second turn answers DONE
    runs = [(e["data"]["branch"], e["data"]["runs"]) for e in events if e["kind"] == "repair.trajectories"]
    assert [(b, r["trajectory"], r["turns"], r["stopped"]) for b, (r,) in runs] == [
        ("b0", 0, 2, "done"), ("b1", 1, 2, "done"), ("b2", 2, 2, "done")]
    outcome = json.loads((out / "instances" / IID / "outcome.json").read_text())
    cands = {short(c["candidate_id"]): c for c in read_jsonl(out / "instances" / IID / "candidates.jsonl")}
    assert list(cands) == ["t1", "t2", "t3"]
    diffs = {e["node_id"].rsplit("/", 1)[1]: e["data"]["diff"] for e in events
             if e["kind"] == "search.node" and e["data"].get("final") and e["parent_id"]}
    for branch, cand in (("b0", "t1"), ("b1", "t2"), ("b2", "t3")):  # the branch's workspace holds its change
        assert cands[cand]["patch"] in diffs[branch]
    assert len({cands[c]["patch"] for c in ("t1", "t2", "t3")}) == 3
    vote = next(e["data"] for e in events if e["kind"] == "repair.test_vote")
    assert vote["votes"] == {f"{IID}/t1": 0, f"{IID}/t2": 3, f"{IID}/t3": 3}
    assert vote["finalists"] == [f"{IID}/t2", f"{IID}/t3"]
    assert outcome["chosen"] == f"{IID}/t3" and outcome["chosen_by"] == "selector"
    assert outcome["samples"] == 6 and outcome["usage"]["model_calls"] == 9  # rank, 3 x 2 turns, 2 selection turns


SCRIPT = ('```python\nfrom inikit import loads\n\nurl = "postgresql://app@db/app?sslmode=require"\n'
          'cfg = loads("[db]\\nurl = " + url + "\\n")\nassert cfg.get("db", "url") == url, cfg.get("db", "url")\n```\n\n')
WRONG = ('inikit/parser.py\n<<<<<<< SEARCH\n        parts = stripped.split("=")\n=======\n'
         '        parts = stripped.split("=", 2)[:2]\n>>>>>>> REPLACE\nEND_EDITS')
RIGHT = ('inikit/parser.py\n<<<<<<< SEARCH\n        parts = stripped.split("=")\n=======\n'
         '        parts = stripped.split("=", 1)\n>>>>>>> REPLACE\nEND_EDITS')


def _trajectory_requests(server: FakeServer) -> int:
    return sum("Which of these" not in json.dumps(r["body"]) for r in server.requests())


def test_kill_9_inside_the_trajectories_then_resume_runs_only_the_unfinished_one(tmp_path: Path) -> None:
    """Two trajectories of one turn: the first answers at once and its branch finishes, the second's answer
    comes so late that the run is killed while it waits. Resumed, the finished trajectory is taken as it was
    (not run again, its candidate kept once) and only the unanswered call is asked again; the vote then
    leaves out t1 (it fails the task's tests) and submits t2."""
    out = tmp_path / "run"
    with fake_server_process() as server:
        server.script({"content": "1"}, {"content": SCRIPT + WRONG}, {"content": SCRIPT + RIGHT, "delay": 60})
        argv = _argv(out, server.spec(), "-c", "nodes.trajectories.n=2", "-c", "nodes.trajectory.turns=1",
                     "-c", "model_options.max_attempts=1", "-c", "tests.feedback=task", "-c", "mutants=false")
        agentflow = str(Path(sys.executable).parent / "agentflow")
        with open(tmp_path / "killed.log", "wb") as log:
            proc = subprocess.Popen([agentflow, *argv], cwd=ROOT, stdout=log, stderr=log)
        kill_9_when(proc, lambda: _trajectory_requests(server) == 2, timeout=240, what="repair")
        events_file = out / "events.jsonl"
        first = read_jsonl(events_file)
        assert _branch_events(first) == [("start", "b0"), ("end", "b0"), ("start", "b1")]
        # the killed task's candidates are its events (the file is written from the state when a task ends)
        assert [short(e["data"]["candidate_id"]) for e in first if e["kind"] == "repair.candidate"] == ["t1"]
        candidates = out / "instances" / IID / "candidates.jsonl"
        assert not candidates.exists()

        server.reset()
        server.script({"content": SCRIPT + RIGHT})
        assert run(argv) == 0  # the same command on the same folder continues the run
        assert len(server.requests()) == 1  # only the second trajectory's call, which had no answer
    after = read_jsonl(events_file)[len(first):]
    (resumed,) = [e["data"] for e in after if e["kind"] == "search.resume"]
    assert (resumed["branches"], resumed["finished"]) == (2, 1)
    assert _branch_events(after) == [("reused", "b0"), ("resume", "b1"), ("end", "b1")]
    assert ran_in(after, "b0", "trajectories") == [] and ran_in(after, "b1", "trajectories") == ["trajectory"]
    assert [short(r["candidate_id"]) for r in read_jsonl(candidates)] == ["t1", "t2"]
    vote = next(e["data"] for e in after if e["kind"] == "repair.test_vote")
    # t1 (the finished branch's) fails the task's tests and is left out; the one script both wrote decides
    assert (vote["tests"], vote["votes"]) == (1, {f"{IID}/t2": 1})
    outcome = json.loads((out / "instances" / IID / "outcome.json").read_text())
    assert outcome["status"] == "submitted" and outcome["chosen"] == f"{IID}/t2"
    assert outcome["report"]["resolved"] is True and outcome["samples"] == 2
