"""`agentflow run` acts on code: the shipped plan_code_critique workflow, with replayed model replies, has
its coder edit a file of the user's workspace inside a Docker sandbox, runs the tests there, and `--apply`
brings the diff back into the workspace (checked as `repair --apply` does). The resume names no workflow
and no -m beyond the second leg's cassette: the recorded ones are reused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentflow.cli.main import run


def _reply(content: str | None = None, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {"response": {"choices": [{"message": message, "finish_reason": "tool_calls" if calls else "stop"}],
                         "usage": {"input_tokens": 100, "output_tokens": 20}, "model": "scripted"}}


def _cassette(path: Path, replies: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"version": 1, "match": "sequence", "interactions": replies}, indent=1))
    return path


def _repo(root: Path) -> Path:
    """A git repository whose add() subtracts, with a test that catches it."""
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    for cmd in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"]):
        subprocess.run(["git", *cmd], cwd=root, check=True)
    return root


def _last(out: str) -> dict[str, Any]:
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.docker
def test_plan_code_critique_edits_tests_and_applies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _repo(tmp_path / "repo")
    plan = _cassette(tmp_path / "plan.json", [
        _reply(json.dumps({"goal": "fix add", "steps": [{"description": "return a + b", "files": ["calc.py"]}]})),
    ])
    work = _cassette(tmp_path / "work.json", [
        _reply(calls=[{"id": "c1", "name": "str_replace",
                       "arguments": {"path": "calc.py", "old_str": "a - b", "new_str": "a + b"}}]),
        _reply(calls=[{"id": "c2", "name": "bash", "arguments": {"command": "python3 -m pytest -q"}}]),
        _reply(json.dumps({"summary": "add() now returns a + b; test_calc passes", "done": True})),
        _reply(json.dumps({"issues": [], "summary": "the fix is right and tested"})),
    ])
    runs = str(tmp_path / "runs")
    first = ["run", "plan_code_critique", "--workspace", str(repo), "-m", f"replay:{plan}", "-o", runs,
             "--thread-id", "t1", "--json", "-i", '{"task": "add() subtracts; make it add"}']
    assert run(first) == 0
    paused = _last(capsys.readouterr().out)
    assert paused["status"] == "interrupted" and paused["interrupt"]["node"] == "approve_plan"
    assert (repo / "calc.py").read_text().endswith("a - b\n")  # nothing reaches the host before --apply

    # no workflow argument: the recorded workflow, workspace and sandbox are reused
    assert run(["run", "-m", f"replay:{work}", "-o", runs, "--resume", "t1", "--approve", "--apply", "--json"]) == 0
    out = capsys.readouterr().out
    done = _last(out)
    assert done["status"] == "done" and done["state"]["verdict"] == "accept", out[-2000:]
    state = done["state"]
    assert "+    return a + b" in state["diff"] and "calc.py" in state["diff"]
    assert state["tests"]["ok"] is True and "1 passed" in state["tests"]["summary"]
    # the coder's own test run happened in the sandbox too
    events = [json.loads(line) for line in (Path(done["run_dir"]) / "events.jsonl").read_text().splitlines()]
    bash = [e for e in events if e.get("kind") == "tool.call" and e["data"].get("name") == "bash"]
    assert bash and bash[0]["data"]["ok"] is True and "1 passed" in bash[0]["data"]["text"]
    # --apply: the checked diff is now in the user's tree, and only that
    assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True).stdout
    assert status.split() == ["M", "calc.py"]
    assert (Path(done["run_dir"]) / "patch.diff").read_text() == state["diff"]


@pytest.mark.docker
def test_apply_refuses_a_symlink_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A coder that makes a symlink in the sandbox: --apply refuses it, the user's tree is unchanged."""
    repo = _repo(tmp_path / "repo")
    plan = _cassette(tmp_path / "plan.json", [_reply(json.dumps({"goal": "x", "steps": [{"description": "x"}]}))])
    work = _cassette(tmp_path / "work.json", [
        _reply(calls=[{"id": "c1", "name": "bash", "arguments": {"command": "ln -s /etc/passwd leak"}}]),
        _reply(json.dumps({"summary": "done", "done": True})),
        _reply(json.dumps({"issues": [], "summary": "fine"})),
    ])
    runs = str(tmp_path / "runs")
    args = ["run", "plan_code_critique", "--workspace", str(repo), "-m", f"replay:{plan}", "-o", runs,
            "--thread-id", "t2", "-i", '{"task": "x"}']
    assert run(args) == 0
    code = run(["run", "-o", runs, "-m", f"replay:{work}", "--resume", "t2", "--approve", "--apply"])
    err = capsys.readouterr().err
    assert code == 2 and "symlink" in err, err
    assert not (repo / "leak").exists() and not (repo / "leak").is_symlink()


@pytest.mark.docker
def test_a_node_cut_short_resumes_with_its_edits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The coder edits a file, then its process stops (the cassette runs out: exit 2). On --resume the node runs
    again: the journal gives back the model's reply (the model is not asked again) and replays the edit instead
    of repeating it, and the sandbox still holds the edit because the workspace diff was kept after the call,
    so the tests pass and the diff comes back."""
    repo = _repo(tmp_path / "repo")
    edit = {"id": "c1", "name": "str_replace", "arguments": {"path": "calc.py", "old_str": "a - b", "new_str": "a + b"}}
    plan = _cassette(tmp_path / "plan.json", [_reply(json.dumps({"goal": "fix", "steps": [{"description": "fix"}]}))])
    cut = _cassette(tmp_path / "cut.json", [_reply(calls=[edit])])  # ends right after the edit
    rest = _cassette(tmp_path / "rest.json", [  # the edit's reply is journaled: the re-run starts after it
        _reply(json.dumps({"summary": "fixed add()", "done": True})),
        _reply(json.dumps({"issues": [], "summary": "ok"})),
    ])
    runs = str(tmp_path / "runs")
    assert run(["run", "plan_code_critique", "--workspace", str(repo), "-m", f"replay:{plan}", "-o", runs,
                "--thread-id", "t3", "-i", '{"task": "fix add"}']) == 0
    assert run(["run", "-o", runs, "-m", f"replay:{cut}", "--resume", "t3", "--approve"]) == 2
    capsys.readouterr()
    assert run(["run", "-o", runs, "-m", f"replay:{rest}", "--resume", "t3", "--json", "--apply"]) == 0
    done = _last(capsys.readouterr().out)
    assert done["status"] == "done" and done["state"]["tests"]["ok"] is True, done["state"].get("tests")
    events = [json.loads(line) for line in (Path(done["run_dir"]) / "events.jsonl").read_text().splitlines()]
    edits = [e["data"] for e in events if e.get("kind") == "tool.call" and e["data"].get("name") == "str_replace"]
    assert [e["replayed"] for e in edits] == [False, True]
    assert sum(1 for e in events if e.get("kind") == "model.replayed") == 1
    assert (repo / "calc.py").read_text().endswith("a + b\n")



FIX = {"id": "c1", "name": "str_replace", "arguments": {"path": "calc.py", "old_str": "a - b", "new_str": "a + b"}}
NEW_TEST = {"id": "c2", "name": "create", "arguments": {
    "path": "test_more.py", "content": "from calc import add\n\n\ndef test_more():\n    assert add(1, 1) == 2\n"}}


def test_a_fork_after_apply_starts_from_the_recorded_workspace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #53: the run's changes were applied to the workspace (`--resume ... --apply`), then a fork from
    the checkpoint after `code` replays the recorded changes (an edit and a new file) onto the workspace the
    run started from, not onto the folder as it is now (which already holds them). A folder changed otherwise
    is refused in one line, exit 2."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # pytest there
    repo = _repo(tmp_path / "repo")
    plan = _cassette(tmp_path / "plan.json", [
        _reply(json.dumps({"goal": "fix add", "steps": [{"description": "return a + b", "files": ["calc.py"]}]})),
    ])
    work = _cassette(tmp_path / "work.json", [
        _reply(calls=[FIX]), _reply(calls=[NEW_TEST]),
        _reply(json.dumps({"summary": "add() now returns a + b", "done": True})),
        _reply(json.dumps({"issues": [], "summary": "the fix is right and tested"})),
    ])
    review = _cassette(tmp_path / "review.json", [_reply(json.dumps({"issues": [], "summary": "still right"}))])
    runs = str(tmp_path / "runs")
    assert run(["run", "plan_code_critique", "--workspace", str(repo), "--sandbox", "local", "-m", f"replay:{plan}",
                "-o", runs, "--thread-id", "t1", "-i", '{"task": "add() subtracts; make it add"}']) == 0
    assert run(["run", "-m", f"replay:{work}", "-o", runs, "--resume", "t1", "--approve", "--apply", "--json"]) == 0
    first = _last(capsys.readouterr().out)
    assert first["status"] == "done" and (repo / "test_more.py").exists()
    assert (repo / "calc.py").read_text().endswith("a + b\n")

    assert run(["run", "-o", runs, "--history", "t1", "--json"]) == 0
    points = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    after_code = next(p for p in points if p["after"] == ["code"])
    assert run(["run", "-o", runs, "-m", f"replay:{review}", "--fork", "t1", "--at", after_code["checkpoint_id"],
                "--json"]) == 0, capsys.readouterr().err
    fork = _last(capsys.readouterr().out)
    # check ran again on the start plus the recorded changes: the same diff, the same two passing tests
    assert fork["status"] == "done" and fork["state"]["diff"] == first["state"]["diff"]
    assert "-    return a - b" in fork["state"]["diff"] and fork["state"]["tests"]["ok"] is True
    assert "2 passed" in fork["state"]["tests"]["summary"]

    # a folder changed by hand (not by --apply) is not the run's start: one line, exit 2, no traceback, and no
    # run folder for a fork that could not start
    (repo / "calc.py").write_text("def add(a, b):\n    return b + a\n")
    folders = sorted(p.name for p in (tmp_path / "runs").iterdir())
    cli = subprocess.run([sys.executable, "-m", "agentflow.cli.main", "run", "-o", runs, "-m", f"replay:{review}", "--fork",
                          "t1", "--at", after_code["checkpoint_id"]], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}, check=False)
    assert cli.returncode == 2, cli.stderr
    assert "Traceback" not in cli.stderr and "changed since the run started" in cli.stderr, cli.stderr
    assert "calc.py" in cli.stderr and "--workspace COPY" in cli.stderr
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == folders
