"""A repair whose search is an MCTS (`workflows/repair.yaml` with `nodes.search.strategy=mcts`) is
resumable inside the search: killed with -9 after a branch's step finished and while another branch's step
runs, then `--resume`d, it takes the finished branch as it was (its nodes not run again), continues the
interrupted branch from its own last checkpoint and workspace, and asks the model server (a real loopback
HTTP process) nothing it had asked before."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentflow.cli.main import run
from tests.models.conftest import fake_server_process
from tests.swe_fixtures import kill_9_when

from .conftest import ROOT, TASKS_FILE, read_jsonl

pytestmark = pytest.mark.docker

IID = "inikit__inikit-1"


def _edit(search: str, replace: str) -> str:
    return f"inikit/parser.py\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\nEND_EDITS"


# the first two branches change different lines without fixing the bug (their tests fail, each verified in
# its own workspace); the fix's SEARCH lines are unchanged in both, so the third branch passes whichever it
# continues
SAME_A = _edit("        if not stripped or stripped.startswith(COMMENT_PREFIXES):",
               "        if not stripped or stripped[:1] in COMMENT_PREFIXES:")
SAME_B = _edit('COMMENT_PREFIXES = ("#", ";")', 'COMMENT_PREFIXES = (";", "#")')
FIX = _edit('        parts = stripped.split("=")', '        parts = stripped.split("=", 1)')


def _bench(out: Path, image: str, spec: str, *extra: str) -> list[str]:
    return ["bench", str(TASKS_FILE), "-i", IID, "--model", spec,
            "--sandbox", "docker", "-c", f"sandbox.image={image}", "-c", "tests.feedback=task", "-c", "mutants=false",
            "-c", "edit.format=search_replace", "-c", "model_options.max_attempts=1", "-c", "search.concurrency=1",
            "-c", "nodes.search.strategy=mcts", "-c", "nodes.search.n=3", "-o", str(out), *extra]


def _events(path: Path) -> list[dict[str, Any]]:
    """The events written so far (a line being written when the run was killed is left out)."""
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _branch_events(events: list[dict[str, Any]], kind: str) -> list[tuple[str, str]]:
    """(what happened, branch) of the search's `search.branch` events."""
    return [(e["data"]["event"], e["node_id"].rsplit("/", 1)[1]) for e in events if e["kind"] == kind]


def _ran(events: list[dict[str, Any]], branch: str) -> list[str]:
    return [e["node_id"].rsplit("/", 1)[1] for e in events if e["kind"] == "node.start"
            and e["data"].get("search") == "search" and e["data"].get("branch") == branch]


def _second_branch_asked(events_file: Path) -> bool:
    """b0's step has finished and b1's edit has its model reply (journaled): b1's step is running."""
    events = _events(events_file)
    ended = ("end", "b0") in _branch_events(events, "search.branch")
    return ended and any(e["kind"] == "model.call" and e["node_id"] == f"{IID}/b1.1" for e in events)


def test_kill_9_inside_an_mcts_repair_then_resume(docker_image: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    events_file = out / "events.jsonl"
    with fake_server_process() as server:
        server.script(*[{"content": text} for text in ("1", SAME_A, SAME_B, FIX)])
        argv = _bench(out, docker_image, server.spec())
        agentflow = str(Path(sys.executable).parent / "agentflow")
        with open(tmp_path / "killed.log", "wb") as log:
            proc = subprocess.Popen([agentflow, *argv], cwd=ROOT, stdout=log, stderr=log)
        kill_9_when(proc, lambda: _second_branch_asked(events_file), timeout=240, what="repair")
        first = _events(events_file)
        # killed inside the search: b0's step had finished, b1's had begun and not ended
        assert ("end", "b0") in _branch_events(first, "search.branch")
        assert ("start", "b1") in _branch_events(first, "search.branch")
        assert ("end", "b1") not in _branch_events(first, "search.branch")
        assert len(server.requests()) == 3  # the ranking, b0's edit, b1's edit

        assert run([*argv, "--resume"]) == 0
        requests = [json.dumps(r["body"], sort_keys=True) for r in server.requests()]
    after = _events(events_file)[len(first):]
    # the model server never saw a request twice: b1's answered edit came from the task's call journal
    assert len(requests) == 4 and max(Counter(requests).values()) == 1
    (resumed,) = [e for e in after if e["kind"] == "search.resume"]
    assert resumed["data"]["branches"] == 2 and resumed["data"]["finished"] == 1
    branch_events = _branch_events(after, "search.branch")
    assert ("reused", "b0") in branch_events and ("resume", "b1") in branch_events
    assert ("start", "b2") in branch_events
    # b0's step ran once, before the kill; b1 went on from its last checkpoint; b2 continued one of them
    assert _ran(first, "b0") == ["edit", "test", "critique"] and _ran(after, "b0") == []
    assert _ran(after, "b1")[-1] == "critique" and "edit" not in _ran(after, "b1")[1:]
    assert _ran(after, "b2") == ["edit", "test"]
    main = [e["node_id"].rsplit("/", 1)[1] for e in after if e["kind"] == "node.start" and "branch" not in e["data"]]
    assert main == ["search", "choose"]  # the nodes before the search had finished: not run again
    tree = {e["node_id"].rsplit("/", 1)[1]: e["parent_id"] for e in after
            if e["kind"] == "search.node" and e["data"].get("final") and e["parent_id"]}
    assert set(tree) == {"b0", "b1", "b2"}
    parent = tree["b2"].rsplit("/", 1)[1]
    assert parent in ("b0", "b1")
    # the run completes with a chosen patch: the fix, on top of its parent branch's change
    outcome = json.loads((out / "instances" / IID / "outcome.json").read_text())
    assert outcome["status"] == "submitted" and outcome["report"]["resolved"] is True
    assert outcome["chosen"] == f"{IID}/b2.2"
    assert '+        parts = stripped.split("=", 1)' in outcome["model_patch"]
    kept = "COMMENT_PREFIXES = (\";\", \"#\")" if parent == "b1" else "stripped[:1] in COMMENT_PREFIXES"
    assert kept in outcome["model_patch"]
    # each candidate is recorded once, across the two legs
    cands = [c["candidate_id"].rsplit("/", 1)[1] for c in read_jsonl(out / "instances" / IID / "candidates.jsonl")]
    assert sorted(cands) == ["b0.1", "b1.1", "b2.2"]
    assert outcome["candidates"] == 3
