"""Forking a past run from any of its checkpoints, with the workspace as it was there: node write_a writes
a.txt in a Docker sandbox, write_b records what it finds, changes a.txt and writes b.txt. A fork from the
checkpoint after write_a, with the state's tag edited, must start from A's workspace (not B's), run write_b
with the edited tag, end done in its own run folder, and leave the original run's folder byte for byte as
it was."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from agentflow.cli.main import run
from agentflow.graph import WorkflowRunner, load_workflow

WORKFLOW = str(Path(__file__).with_name("fork.yaml"))


def _hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _last(out: str) -> dict[str, Any]:
    return next(json.loads(line) for line in reversed(out.strip().splitlines()) if line.startswith("{"))


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "readme.txt").write_text("the user's folder\n")
    return ws


@pytest.mark.docker
def test_cli_fork_after_a_node_has_that_nodes_workspace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws, runs = _workspace(tmp_path), str(tmp_path / "runs")
    assert run(["run", WORKFLOW, "--workspace", str(ws), "-o", runs, "--thread-id", "t1", "--json"]) == 0
    first = _last(capsys.readouterr().out)
    assert first["status"] == "done" and first["state"]["b_saw"] == "a first\nno-b", first
    source = Path(first["run_dir"])
    before = _hashes(source)

    assert run(["run", "-o", runs, "--history", "t1", "--json"]) == 0
    points = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    after_a = next(p for p in points if p["after"] == ["write_a"])
    assert after_a["next"] == ["write_b"] and after_a["workspace_diff"]

    assert run(["run", "-o", runs, "--fork", "t1", "--at", after_a["checkpoint_id"][:-4],
                "--edit", '{"tag": "second"}', "--thread-id", "t2", "--json"]) == 0
    forked = _last(capsys.readouterr().out)
    state = forked["state"]
    # write_b found A's a.txt and no b.txt: the workspace as it was at the checkpoint, not at the run's end
    assert forked["status"] == "done" and state["b_saw"] == "a first\nno-b", forked
    assert state["b_tag"] == "second" and state["a_tag"] == "first"  # the edit reached the node that ran on
    rdir = Path(forked["run_dir"])
    assert rdir != source and rdir.parent == source.parent
    meta = json.loads((rdir / "run.json").read_text())
    assert meta["forked_from"] == {"run_id": first["run_id"], "thread_id": "t1",
                                   "checkpoint_id": after_a["checkpoint_id"]}
    patch = (rdir / "patch.diff").read_text()
    assert "+a changed by b second" in patch and "+b second" in patch and "first" not in patch
    events = [json.loads(line) for line in (rdir / "events.jsonl").read_text().splitlines()]
    assert any(e["kind"] == "run.fork" and e["data"]["forked_from"]["thread_id"] == "t1" for e in events)
    assert _hashes(source) == before  # the original run's folder is untouched, byte for byte
    assert (ws / "readme.txt").read_text() == "the user's folder\n" and sorted(p.name for p in ws.iterdir()) == ["readme.txt"]

    # the fork is a run like any other: its own history starts at the checkpoint it was forked from
    assert run(["run", "-o", runs, "--history", "t2", "--json"]) == 0
    own = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert own[0]["source"] == "fork" and own[0]["checkpoint_id"] == after_a["checkpoint_id"]
    assert [p["source"] for p in own[1:]] == ["update", "loop"] and own[-1]["next"] == []


@pytest.mark.docker
async def test_python_fork_restores_the_workspace(tmp_path: Path) -> None:
    ws, spec = _workspace(tmp_path), load_workflow(WORKFLOW)
    async with WorkflowRunner(spec, run_dir=tmp_path / "r1", workspace=ws) as runner:
        done = await runner.start({"tag": "one"}, thread_id="a")
        assert done.ok and "+b one" in await runner.diff()
        history = await runner.history("a")
        # forked in the same run directory (a new thread there): from the start, before any node ran
        again = await runner.fork("a", checkpoint_id=history[0].checkpoint_id, update={"tag": "two"},
                                  new_thread_id="b")
    assert again.ok and again.state["a_tag"] == "two" and again.state["b_saw"] == "a two\nno-b"
    before = _hashes(tmp_path / "r1")
    async with WorkflowRunner(spec, run_dir=tmp_path / "r2", workspace=ws) as other:
        third = await other.fork("a", after_node="write_b", source=tmp_path / "r1", new_thread_id="c")
        assert third.ok and third.state == done.state  # forked at the end: nothing left to run
        assert "+a changed by b one" in await other.diff()  # the sandbox holds the run's final workspace
    assert _hashes(tmp_path / "r1") == before


def test_fork_of_an_unknown_thread_or_checkpoint_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = str(tmp_path / "runs")
    approval = str(Path(__file__).with_name("approval.yaml"))
    assert run(["run", approval, "-o", runs, "--thread-id", "p", "-i", '{"topic": "x"}']) == 0
    capsys.readouterr()
    for args, expected in (
        (["--fork", "nope"], "no run with thread 'nope'"),
        (["--fork", "p", "--at", "0000"], "thread 'p' has no checkpoint '0000'"),
        (["--fork", "p", "--after", "publish"], "no kept checkpoint after node 'publish'"),
        (["--fork", "p", "--edit", '{"nokey": 1}'], "'nokey', which workflow 'approval' does not declare"),
    ):
        assert run(["run", "-o", runs, *args]) == 2, args
        err = capsys.readouterr().err.strip()
        assert expected in err and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert [p.name for p in (tmp_path / "runs").iterdir()].__len__() == 1  # no run folder for a bad fork
    # a state-only fork (no workspace): from after `write`, with the topic edited; it pauses at review again
    assert run(["run", "-o", runs, "--fork", "p", "--after", "write", "--edit", '{"draft": "edited"}', "--json"]) == 0
    out = _last(capsys.readouterr().out)
    assert out["status"] == "interrupted" and out["interrupt"]["node"] == "review"
    assert out["state"]["draft"] == "edited"


def test_recorded_workspace_diffs_hold_no_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The diff at each checkpoint is code in the run folder: known secrets are redacted there as in
    patch.diff (a URL's password in the code is the code's own and stays); a diff id read from a checkpoint
    names only a file of the store, never a path."""
    from agentflow.errors import UserError
    from agentflow.graph.run.history import DiffStore

    monkeypatch.setenv("OPENAI_API_KEY", "sk-fork-test-secret-123456")
    store = DiffStore(tmp_path)
    digest = store.put("+key = 'sk-fork-test-secret-123456'\n+url = 'http://u:pw-in-code@h/'\n")
    raw = b"".join(p.read_bytes() for p in (tmp_path / "diffs").iterdir())
    text = store.get(digest)
    assert b"sk-fork-test-secret" not in raw and "sk-fork-test-secret" not in text
    assert "***" in text and "pw-in-code" in text
    assert store.put(text) == digest and len(list((tmp_path / "diffs").iterdir())) == 1  # stored once
    with pytest.raises(UserError, match="bad workspace diff id"):
        store.get("../../run.json")
