"""`agentflow runs prune -o runs --keep-last 1` on real run folders: a paused run, a fork of it in another run
folder (taken from an old checkpoint), and an MCTS search killed with -9 while a branch was mid-step. After
the prune the checkpoint files are smaller, the paused run approves and finishes, its fork's source forks
again, and the killed search resumes: the branches whose steps had finished are taken as they were, the
interrupted one continues from its own last checkpoint (each branch step's effect happened once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentflow.cli.main import run
from tests.graph.search_nodes import kill_when_paused, killable_search

ROOT = Path(__file__).resolve().parents[2]
PRUNE = str(ROOT / "tests" / "graph" / "prune.yaml")


def _killed_search(tmp_path: Path, runs: Path) -> Path:
    """A search run killed with -9 while branch b2 is mid-step; its effects file."""
    effects = tmp_path / "effects.txt"
    args = [sys.executable, "-m", "agentflow.cli.main", "run", str(killable_search(tmp_path / "s.yaml")), "-o", str(runs),
            "--thread-id", "s", "-m", "test", "-c", "keep_last=null",
            "-i", json.dumps({"task": "review", "effects": str(effects)})]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AF_TEST_PAUSE_BRANCH": "b2"}
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    kill_when_paused(proc, effects)
    assert effects.read_text().split() == ["b0", "b1", "b2"]
    return effects


def _json_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_prune_keeps_what_paused_runs_forks_and_a_killed_search_need(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    o = ["-o", str(runs)]
    assert run(["run", PRUNE, *o, "--thread-id", "p", "-c", "keep_last=null", "--json"]) == 0
    assert _json_lines(capsys.readouterr().out)[-1]["status"] == "interrupted"
    assert run(["run", *o, "--history", "p", "--json"]) == 0
    source = [p for p in _json_lines(capsys.readouterr().out) if p["after"] == ["step"]][1]
    assert run(["run", *o, "--fork", "p", "--at", source["checkpoint_id"], "--thread-id", "f", "--json"]) == 0
    assert _json_lines(capsys.readouterr().out)[-1]["status"] == "interrupted"
    effects = _killed_search(tmp_path, runs)

    assert run(["runs", "prune", *o, "--keep-last", "1", "--json"]) == 0
    pruned = {Path(r["run_dir"]).name: r for r in _json_lines(capsys.readouterr().out)}
    assert len(pruned) == 3 and all(r["checkpoints"] < r["checkpoints_before"] for r in pruned.values()), pruned
    assert all(r["bytes"] <= r["bytes_before"] for r in pruned.values())

    # the paused run and its fork approve and finish; the fork's source, in the first run, forks again
    for thread in ("p", "f"):
        assert run(["run", *o, "--resume", thread, "--approve", "--json"]) == 0
        assert _json_lines(capsys.readouterr().out)[-1]["state"]["published"] == "DRAFT ABOUT NOTHING"
    assert run(["run", *o, "--fork", "p", "--at", source["checkpoint_id"], "--thread-id", "g", "--json"]) == 0
    assert _json_lines(capsys.readouterr().out)[-1]["state"]["n"] == 6

    # the killed search resumes from what the prune left: finished steps reused, b2 continued, b3 new
    assert run(["run", *o, "--resume", "s", "--json"]) == 0, capsys.readouterr().err
    result = _json_lines(capsys.readouterr().out)[-1]
    assert result["status"] == "done" and len(result["state"]["report"]["branches"]) == 4
    assert sorted(effects.read_text().split()) == ["b0", "b1", "b2", "b3"]  # each step's effect once


def test_prune_says_what_is_wrong(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    assert run(["runs", "prune", "-o", str(runs), "--keep-last", "0"]) == 2
    assert "--keep-last must be at least 1" in capsys.readouterr().err
    assert run(["runs", "prune", str(tmp_path)]) == 2
    assert "has no checkpoints.db" in capsys.readouterr().err
    assert run(["run", PRUNE, "-o", str(runs), "--thread-id", "p", "--json"]) == 0
    (rdir,) = runs.iterdir()
    from agentflow.graph.persist.checkpoint import AgentflowSaver

    with AgentflowSaver(rdir / "checkpoints.db"):  # a run still going holds its file open
        assert run(["runs", "prune", "-o", str(runs)]) == 1
    err = capsys.readouterr().err
    assert "skipped" in err and "open in another process" in err
    assert run(["runs", "prune", "-o", str(runs)]) == 0  # it has ended
