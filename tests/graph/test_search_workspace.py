"""The shipped composition workflow `plan_code_search` searches over its coder from YAML, end to end in Docker
with replayed model replies: every branch edits and tests its own fork of the workspace, the tests value the
branches, and the run goes on in the chosen branch's workspace. MCTS expands a branch from its checkpoint
*and* its workspace: a child's edit only applies to the file as its parent left it."""

from __future__ import annotations

import json
import subprocess
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


def _edit(old: str, new: str) -> dict[str, Any]:
    return _reply(calls=[{"id": "e", "name": "str_replace",
                          "arguments": {"path": "calc.py", "old_str": old, "new_str": new}}])


def _bash(command: str) -> dict[str, Any]:
    return _reply(calls=[{"id": "s", "name": "bash", "arguments": {"command": command}}])


def _done(summary: str) -> dict[str, Any]:
    return _reply(json.dumps({"summary": summary, "done": True}))


PLAN = _reply(json.dumps({"goal": "fix add", "steps": [{"description": "return a + b", "files": ["calc.py"]}]}))
CRITIC = _reply(json.dumps({"issues": [], "summary": "right and tested"}))


def _cassette(path: Path, replies: list[dict[str, Any]]) -> str:
    path.write_text(json.dumps({"version": 1, "match": "sequence", "interactions": replies}, indent=1))
    return f"replay:{path}"


def _repo(root: Path) -> Path:
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    for cmd in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"]):
        subprocess.run(["git", *cmd], cwd=root, check=True)
    return root


def _events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def _run(tmp_path: Path, model: str, capsys: pytest.CaptureFixture[str], *settings: str) -> tuple[dict[str, Any], Path]:
    repo = _repo(tmp_path / "repo")
    args = ["run", "plan_code_search", "--workspace", str(repo), "-m", model, "-o", str(tmp_path / "runs"),
            "--json", "-i", '{"task": "add() subtracts; make it add"}', "-c", "nodes.attempt.concurrency=1"]
    for item in settings:
        args += ["-c", item]
    code = run(args)
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert (repo / "calc.py").read_text().endswith("a - b\n")  # nothing reaches the host without --apply
    return result, Path(result["run_dir"])


@pytest.mark.docker
def test_best_of_4_over_the_coder_each_branch_in_its_own_workspace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    replies = [
        PLAN,
        _edit("a - b", "(a + b)  # was a - b, which subtracted"), _done("b0: fixed, with a note"),   # passes, big
        _edit("a - b", "a * b"), _done("b1: multiply"),                                             # fails ...
        _edit("a * b", "a + b"), _done("b1: add, second try"),                                      # ... then passes
        _edit("a - b", "a+b"), _done("b2: smallest fix"),                                           # passes, smallest
        _done("b3: nothing to do"), _done("b3: still nothing"),                                     # fails twice
        CRITIC,
    ]
    result, run_dir = _run(tmp_path, _cassette(tmp_path / "c.json", replies), capsys)
    state = result["state"]
    assert result["status"] == "done" and state["critique"]["summary"] == "right and tested"
    report = state["search"]
    values = {b["id"]: b["value"] for b in report["branches"]}
    assert values == {"b0": 1.0, "b1": 1.0, "b2": 1.0, "b3": 0.0}
    assert report["chosen"] == "b2"  # the smallest passing diff
    assert "+    return a+b" in state["diff"] and state["tests"]["ok"] is True
    # the run's workspace is the chosen branch's: the patch the CLI keeps is that diff
    assert (run_dir / "patch.diff").read_text() == state["diff"]
    events = _events(run_dir)
    # every branch ran the subgraph's nodes as graph nodes, tagged with its branch
    ran = {(e["data"]["branch"], e["node_id"]) for e in events if e["kind"] == "node.end" and e["data"].get("branch")}
    assert {("b0", "check"), ("b1", "gate"), ("b2", "code"), ("b3", "check")} <= ran
    # each branch tested its own workspace: b1's first test run failed after its own edit, not another's
    tests = [e for e in events if e["kind"] == "tool.call" and e["data"].get("name") == "run_tests"]
    outcome = [(e["data"]["branch"], e["data"]["ok"]) for e in tests]
    assert outcome == [("b0", True), ("b1", False), ("b1", True), ("b2", True), ("b3", False), ("b3", False)]


@pytest.mark.docker
def test_mcts_expands_a_branch_from_its_checkpoint_and_workspace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    replies = [
        PLAN,
        _edit("a - b", "a * b"), _done("b0: multiply"),         # fails: paused after its gate, retry next
        _edit("a - b", "a // b"), _done("b1: divide"),          # fails too
        # b2 expands b0 or b1 (UCT); this edit only works on a parent's workspace, not the original file
        _bash("sed -i 's#return a [*/]* b#return a + b#' calc.py"), _done("b2: add"),
        CRITIC,
    ]
    result, run_dir = _run(tmp_path, _cassette(tmp_path / "c.json", replies), capsys,
                           "nodes.attempt.strategy=mcts", "nodes.attempt.n=3", "nodes.attempt.expand=2")
    state = result["state"]
    report = state["search"]
    by_id = {b["id"]: b for b in report["branches"]}
    assert by_id["b0"]["parent"] == by_id["b1"]["parent"] == "root"
    assert by_id["b2"]["parent"] in ("b0", "b1") and by_id["b2"]["terminal"] and by_id["b2"]["value"] == 1.0
    assert report["chosen"] == "b2" and state["tests"]["ok"] is True
    assert state["diff"].count("\n+    return") == 1 and "+    return a + b" in state["diff"]
    assert state["attempts"] == 2  # the child went on from its parent's state: its second attempt
    tree = {e["node_id"]: e["parent_id"] for e in _events(run_dir) if e["kind"] == "search.node"}
    assert tree["attempt/b2"] == f"attempt/{by_id['b2']['parent']}" and tree["attempt/b0"] == "attempt"
