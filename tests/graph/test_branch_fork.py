"""A fork from a search branch's checkpoint (issue #53): `agentflow run --fork THREAD~attempt~bK --after write`
and `WorkflowRunner.fork` with a branch's thread id start a new run of the subgraph that branch ran, from the
branch's state and its own workspace at that checkpoint (not the chosen branch's, not the run's end). Each
branch of tests/graph/branch_fork.yaml reviews the task (an agent on the test model), writes attempt.txt
with its number in its workspace and checks it; a fork after `write` with an edited number runs `check` on
the branch's file. Best-of-n and MCTS; a local sandbox and real SQLite checkpoints."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentflow.cli.main import run
from agentflow.graph import WorkflowRunner, load_workflow
from agentflow.graph.run.context import RunHandles
from agentflow.graph.search.tree import SearchReport

WORKFLOW = str(Path(__file__).with_name("branch_fork.yaml"))
STRATEGIES = {"best_of_n": [], "mcts": ["-c", "nodes.attempt.strategy=mcts", "-c", "nodes.attempt.n=6"]}


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README").write_text("a repo\n")
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    return ws


def _last(out: str) -> dict[str, Any]:
    return next(json.loads(line) for line in reversed(out.strip().splitlines()) if line.startswith("{"))


def _threads(report: SearchReport, root: str) -> dict[str, str]:
    """Branch id -> its checkpoint thread (a child's thread extends its parent's)."""
    parents = {b.id: b.parent for b in report.branches}

    def chain(bid: str) -> list[str]:
        parent = parents[bid]
        return [*chain(parent), bid] if parent is not None and parent in parents else [bid]

    return {bid: "~".join([root, "attempt", *chain(bid)]) for bid in parents}


def _wrote(runs: str, thread: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The branch threads among `thread`'s that hold a checkpoint after `write`."""
    assert run(["run", "-o", runs, "--history", thread, "--json"]) == 0, capsys.readouterr().err
    points = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    return [p["checkpoint_id"] for p in points if "write" in p["after"]]


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_cli_fork_of_a_branch_runs_on_from_its_state_and_workspace(
    tmp_path: Path, strategy: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ws, runs = _workspace(tmp_path), str(tmp_path / "runs")
    assert run(["run", WORKFLOW, "-m", "test", "--sandbox", "local", "--workspace", str(ws), "-o", runs,
                "--thread-id", "t", "-i", '{"task": "fix it"}', "--json", *STRATEGIES[strategy]]) == 0
    first = _last(capsys.readouterr().out)
    report = SearchReport.model_validate(first["state"]["report"])
    threads = _threads(report, "t")
    # the last branch that wrote its file (an odd number: not the one chosen, whose attempt passed)
    thread = [t for bid, t in threads.items() if int(bid[1:]) % 2 and _wrote(runs, t, capsys)][-1]
    k = int(thread.rsplit("~", 1)[-1][1:])
    source = Path(first["run_dir"])
    before = {p: p.read_bytes() for p in source.rglob("*") if p.is_file() and p.name != "events.jsonl"}

    assert run(["run", "-o", runs, "--fork", thread, "--after", "write", "--edit", '{"attempt_no": 4}',
                "--thread-id", "f", "--json"]) == 0, capsys.readouterr().err
    forked = _last(capsys.readouterr().out)
    assert forked["status"] == "done", forked
    # check ran in the branch's workspace (its attempt.txt), on the edited state
    assert forked["state"]["saw"] == f"attempt {k}" and forked["state"]["tests"] == {"ok": False, "no": 4}
    assert Path(forked["run_dir"]) != source
    assert (Path(forked["run_dir"]) / "patch.diff").read_text().count(f"+attempt {k}") == 1
    record = json.loads((Path(forked["run_dir"]) / "run.json").read_text())
    assert record["forked_from"]["thread_id"] == thread
    assert {p: p.read_bytes() for p in before} == before  # the source run is untouched

    # the fork is a run of the branch's subgraph: its history lists that graph's nodes, and it forks again
    assert run(["run", "-o", runs, "--history", "f", "--json"]) == 0
    points = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert points[-1]["after"] == ["check"] and points[-1]["next"] == [], points
    assert run(["run", "-o", runs, "--fork", "f", "--at", points[0]["checkpoint_id"], "--edit",
                '{"attempt_no": 2}', "--thread-id", "g", "--json"]) == 0, capsys.readouterr().err
    again = _last(capsys.readouterr().out)
    assert again["state"]["saw"] == f"attempt {k}" and again["state"]["tests"] == {"ok": False, "no": 2}


def test_cli_fork_of_a_branch_names_what_is_wrong(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws, runs = _workspace(tmp_path), str(tmp_path / "runs")
    assert run(["run", WORKFLOW, "-m", "test", "--sandbox", "local", "--workspace", str(ws), "-o", runs,
                "--thread-id", "t", "-i", '{"task": "fix it"}', "--json"]) == 0
    capsys.readouterr()
    assert run(["run", "-o", runs, "--fork", "t~attempt~b1", "--after", "wrte"]) == 2
    assert "did you mean 'write'" in capsys.readouterr().err
    assert run(["run", "-o", runs, "--fork", "t~attempt~b1", "--edit", '{"nosuch": 1}']) == 2
    assert "nosuch" in capsys.readouterr().err
    assert run(["run", "-o", runs, "--fork", "t~atempt~b1"]) == 2
    assert "no search node 'atempt'" in capsys.readouterr().err
    assert sorted(p.name for p in Path(runs).iterdir()) == [next(Path(runs).iterdir()).name]  # no new folder


@pytest.mark.parametrize("strategy", list(STRATEGIES))
async def test_python_fork_of_a_branch_and_a_fresh_runner_resumes_it(tmp_path: Path, strategy: str) -> None:
    spec = load_workflow(WORKFLOW)
    if strategy == "mcts":
        spec.nodes["attempt"].search = {**dict(spec.nodes["attempt"].search or {}), "strategy": "mcts", "n": 6}
    ws, rdir = _workspace(tmp_path), tmp_path / "run"

    def runner() -> WorkflowRunner:
        return WorkflowRunner(spec, run_dir=rdir, sandbox="local", workspace=ws, context=RunHandles(model="test"))

    async with runner() as first:
        result = await first.start({"task": "fix it"}, thread_id="t")
        report = SearchReport.model_validate(result.state["report"])
        found = []
        for bid, thread in _threads(report, "t").items():
            after = [p for p in await first.history(thread) if "write" in p.after]
            if after and int(bid[1:]) % 2:
                found.append(thread)
        thread = found[0]
        forked = await first.fork(thread, after_node="write", update={"attempt_no": 6}, new_thread_id="f")
    k = int(thread.rsplit("~", 1)[-1][1:])
    assert forked.status == "done" and forked.state["saw"] == f"attempt {k}", forked
    assert forked.state["tests"] == {"ok": False, "no": 6}
    async with runner() as fresh:  # another runner (a new process) knows the fork runs the branch's graph
        history = await fresh.history("f")
        assert history[-1].after == ["check"] and not history[-1].next
        assert (await fresh.result("f")).state["saw"] == f"attempt {k}"


def test_text_history_lists_each_branch_with_its_values_tests_and_thread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`run --history THREAD` (text) prints under the search node's checkpoint one line per branch: parent,
    own and backed-up value, tests, diff id and the thread `--fork` takes; that thread forks as printed."""
    ws, runs = _workspace(tmp_path), str(tmp_path / "runs")
    assert run(["run", WORKFLOW, "-m", "test", "--sandbox", "local", "--workspace", str(ws), "-o", runs,
                "--thread-id", "t", "-i", '{"task": "fix it"}', "--json", *STRATEGIES["mcts"]]) == 0
    report = SearchReport.model_validate(_last(capsys.readouterr().out)["state"]["report"])
    assert run(["run", "-o", runs, "--history", "t"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("      b")}
    assert sorted(lines) == sorted(b.id for b in report.branches), out
    for b in report.branches:
        line = lines[b.id]
        assert f"value {b.value:.2f} mean {b.mean:.2f}" in line and f"thread {b.thread}" in line
        assert ("tests pass" if b.tests and b.tests.get("ok") else "tests fail" if b.tests else "tests -") in line
        assert (f"diff {b.diff_id[:12]}" if b.diff_id else "no diff") in line
        assert (f"<- {b.parent}" in line) == (b.parent is not None)
    assert "search report 'report'" in out
    # a branch MCTS left between steps, forked at its latest checkpoint, runs on to the subgraph's end
    open_branch = next(b for b in report.branches if not b.terminal and not b.error)
    assert run(["run", "-o", runs, "--fork", str(open_branch.thread), "--thread-id", "f", "--json"]) == 0
    forked = _last(capsys.readouterr().out)
    state = forked["state"]
    assert forked["status"] == "done" and state["tests"]["no"] in (int(open_branch.id[1:]), 9), forked
    assert state["saw"] == f"attempt {state['tests']['no']}"
