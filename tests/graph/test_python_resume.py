"""Resume from Python is the CLI's resume: a program that builds planner -> coder -> check with
`WorkflowRunner(..., run_dir=...)` (real Docker sandbox, replayed model) is killed with -9 after the coder's
first edit and resumed by the same program: the fresh sandbox gets the run's diff back before the journal
replays that edit, the final diff equals an uninterrupted run's, usage is the sum of both legs, and the
ledger (run.json, events.jsonl, usage.json, patch.diff) is in the run folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = Path(__file__).with_name("ledger_program.py")


def _reply(content: str | None = None, calls: list[dict[str, Any]] | None = None, tokens: int = 100) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {"response": {"choices": [{"message": message, "finish_reason": "tool_calls" if calls else "stop"}],
                         "usage": {"input_tokens": tokens, "output_tokens": 20}, "model": "scripted"}}


def _script(path: Path) -> Path:
    """The model's replies in order: the planner's plan, then the coder's two edits and its report."""
    edit = {"id": "c1", "name": "str_replace", "arguments": {"path": "calc.py", "old_str": "a - b", "new_str": "a + b"}}
    note = {"id": "c2", "name": "create", "arguments": {"path": "NOTES.md", "content": "add() adds now\n"}}
    replies = [
        _reply(json.dumps({"goal": "fix add", "steps": [{"description": "return a + b", "files": ["calc.py"]}]}), tokens=101),
        _reply(calls=[edit], tokens=202),
        _reply(calls=[note], tokens=303),
        _reply(json.dumps({"summary": "add() returns a + b", "done": True}), tokens=404),
    ]
    path.write_text(json.dumps({"version": 1, "match": "sequence", "interactions": replies}))
    return path


def _program(run_dir: Path, workspace: Path, model: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, str(PROGRAM), str(run_dir), str(workspace), "--model", str(model), *extra],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _events(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "events.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def _comparable(usage: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in usage.items() if k != "wall_seconds"}


@pytest.mark.docker
def test_kill_9_mid_coder_then_resume_from_python(tmp_path: Path) -> None:
    from agentflow.sandbox.docker import reap_orphans

    workspace = tmp_path / "repo"
    workspace.mkdir()
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    recorded = tmp_path / "recorded.json"  # the uninterrupted run's calls, replayed by request below
    reference = _finish(_program(tmp_path / "ref", workspace, _script(tmp_path / "script.json"), "--record", str(recorded)))
    assert reference["status"] == "done" and reference["check"]["ok"] is True, reference
    assert "+    return a + b" in reference["diff"] and "+add() adds now" in reference["diff"]

    run_dir = tmp_path / "run"
    proc = _program(run_dir, workspace, recorded, "--hold")
    try:
        deadline = time.monotonic() + 180
        while not any(e["kind"] == "tool.call" and e["node_id"] == "coder" for e in _events(run_dir)):
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the coder never made its first tool call"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    first_leg = json.loads((run_dir / "usage.json").read_text())
    assert (first_leg["model_calls"], first_leg["tool_calls"], first_leg["tokens"]) == (2, 1, 121 + 222)
    assert "+    return a + b" in (run_dir / "patch.diff").read_text()  # kept before the edit was journaled

    resumed = _finish(_program(run_dir, workspace, recorded, "--resume", "t1"))
    reap_orphans()  # the killed program's sandbox
    assert resumed["status"] == "done" and resumed["check"]["ok"] is True, resumed
    assert resumed["diff"] == reference["diff"]
    assert (run_dir / "patch.diff").read_text() == reference["diff"]
    assert _comparable(resumed["usage"]) == _comparable(reference["usage"])  # the sum of both legs
    assert resumed["usage"]["model_calls"] == 4 and resumed["usage"]["tool_calls"] == 2

    events = _events(run_dir)
    kinds = [e["kind"] for e in events]
    assert kinds.count("run.start") == 1 and kinds.count("run.resume") == 1 and kinds.count("run.end") == 1
    restored = kinds.index("workspace.restored")
    edits = [i for i, e in enumerate(events) if e["kind"] == "tool.call" and e["data"]["name"] == "str_replace"]
    assert [events[i]["data"]["replayed"] for i in edits] == [False, True] and edits[1] > restored
    assert kinds.count("model.replayed") == 1  # the coder's first reply came from the journal
    calls = [e["data"]["usage"] for e in events if e["kind"] == "model.call"]
    assert sum(c["input_tokens"] + c["output_tokens"] for c in calls) == resumed["usage"]["tokens"]
    record = json.loads((run_dir / "run.json").read_text())
    assert record["thread_id"] == "t1" and record["status"] == "done" and record["run_id"] == "run"
