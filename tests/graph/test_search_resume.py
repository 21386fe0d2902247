"""A search is resumable inside: a run killed with -9 while a branch of its MCTS is mid-step, then resumed,
takes the branches whose steps had finished as they were (not run again), continues the interrupted branch
from its own last checkpoint, and asks the (real, loopback) model server nothing it had answered before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.graph.search_nodes import kill_when_paused, killable_search
from tests.models.conftest import fake_server_process

ROOT = Path(__file__).resolve().parents[2]
CRITIQUE = json.dumps({"issues": [], "summary": "looks right"})


def _events(runs: Path) -> list[dict[str, Any]]:
    (events,) = runs.glob("*/events.jsonl")
    return [json.loads(line) for line in events.read_text().splitlines()]


def _lineage(report: dict[str, Any], branch: str) -> list[str]:
    parents = {b["id"]: b["parent"] for b in report["branches"]}
    out = []
    while branch != "root":
        out.append(branch)
        branch = parents[branch]
    return out[::-1]


@pytest.mark.parametrize("sandbox", [None, pytest.param("docker", marks=pytest.mark.docker)])
def test_kill_9_inside_an_mcts_search_then_resume(tmp_path: Path, sandbox: str | None) -> None:
    """With a Docker sandbox, each branch's workspace is restored from the diff recorded at its checkpoint:
    the chosen branch's files hold the trail of its whole lineage, written before and after the kill."""
    wf = killable_search(tmp_path / "wf.yaml")
    effects = tmp_path / "effects.txt"
    runs = tmp_path / "runs"
    with fake_server_process() as server:
        server.script(*[{"content": CRITIQUE} for _ in range(8)])
        args = [sys.executable, "-m", "agentflow.cli.main", "run", str(wf), "-o", str(runs), "--thread-id", "t",
                "-m", server.spec(), "-i", json.dumps({"task": "review", "effects": str(effects)})]
        if sandbox is not None:
            (tmp_path / "repo").mkdir()
            (tmp_path / "repo" / "README").write_text("a workspace\n")
            args += ["--workspace", str(tmp_path / "repo")]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "AF_TEST_PAUSE_BRANCH": "b2", "OPENAI_API_KEY": "x"}
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        kill_when_paused(proc, effects)
        before = len(server.requests())
        assert effects.read_text().split() == ["b0", "b1", "b2"]
        assert before == 3  # one model call per step: b0, b1, and b2's before it was killed

        env.pop("AF_TEST_PAUSE_BRANCH")
        resumed = subprocess.run([sys.executable, "-m", "agentflow.cli.main", "run", "-o", str(runs), "--resume",
                                  "t", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                                 check=False)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        result = json.loads(resumed.stdout.strip().splitlines()[-1])
        report = result["state"]["report"]
        assert result["status"] == "done" and len(report["branches"]) == 4
        # b2's step went on from its checkpoint after `ask`: one more request for b3 only, none repeated
        assert len(server.requests()) == before + 1
    # every branch step's journaled effect happened once: b2's was replayed, not repeated
    assert sorted(effects.read_text().split()) == ["b0", "b1", "b2", "b3"]
    events = _events(runs)
    kinds = [(e["data"].get("event"), e["node_id"]) for e in events if e["kind"] == "search.branch"]
    assert ("reused", "go/b0") in kinds and ("reused", "go/b1") in kinds and ("resume", "go/b2") in kinds
    assert ("start", "go/b3") in kinds
    (resume,) = [e for e in events if e["kind"] == "search.resume"]
    assert resume["data"]["branches"] == 3 and resume["data"]["finished"] == 2
    if sandbox is not None:
        patch = (Path(result["run_dir"]) / "patch.diff").read_text()
        added = [line[1:] for line in patch.splitlines() if line.startswith("+b")]
        assert added == _lineage(report, report["chosen"]), (patch, report)
