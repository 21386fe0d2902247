"""A workflow's wall-clock limit ends the run at the deadline with `budget:wall_seconds` and its partial results:
an agent node's model call in flight (a real, slow OpenAI-compatible server on loopback) is cut, and so is
work that is no call at all (a function node); the failure is in the checkpoint, so the thread reads back
as failed and `resume` runs the cut node again. `agentflow run --wall-time` keeps the run's events,
checkpoints and workspace diff."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import openai  # noqa: F401 - up front: its first import blocks the event loop (seconds when busy), no deadline fires
import pytest
import yaml

from agentflow.budget import Budget
from agentflow.cli.main import run
from agentflow.events import EventLog, read_events
from agentflow.graph import RunHandles, WorkflowRunner, spec_from_dict
from agentflow.models.spec import load_model

from ..models.conftest import FakeServer, fake_server_process
from . import nodes

FAST = {"retry_initial_s": 0.01, "retry_max_wait_s": 0.5, "timeout_s": 60, "max_attempts": 1}


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeServer]:
    with fake_server_process() as server:
        yield server


def _spec(second: dict) -> dict:
    return {"name": "cut", "state": {"task": {"type": "str"}, "draft": {"type": "str"}, "summary": {"type": "str"},
                                     "answer": {"type": "dict"}},
            "nodes": {"draft": {"fn": "tests.graph.nodes:write_draft", "next": "second"}, "second": second}}


async def test_an_agent_node_is_cut_at_the_deadline_and_the_run_keeps_what_finished(
    llm: FakeServer, tmp_path: Path
) -> None:
    llm.reset()
    llm.script({"content": "too late", "delay": 10})
    agent_node = {"agent": "critic", "output": "answer", "next": "END",
                  "args": {"input": {"task": "task", "summary": "task"}, "config": {"tools": []}}}
    events = EventLog(tmp_path / "events.jsonl", run_id="r")
    ctx = RunHandles(chat_model=load_model(llm.spec("tiny"), **FAST), events=events)
    async with WorkflowRunner(spec_from_dict(_spec(agent_node)), run_dir=tmp_path / "r", context=ctx) as runner:
        ctx.budget = budget = Budget(wall_seconds=2)  # its clock starts now, with the run (not with the imports)
        result = await runner.start({"task": "review"}, thread_id="t")
        ended = budget.used.wall_seconds
        again = await runner.result("t")
    events.close()
    assert ended < 2.5, f"the run ended {ended:.2f}s after its budget started"
    assert (result.status, result.failed_node, result.stop_reason) == ("failed", "second", "budget:wall_seconds")
    assert result.state["draft"] == "draft about nothing"  # what finished before the deadline stays
    assert (again.status, again.stop_reason, again.limit) == ("failed", "budget:wall_seconds", "wall_seconds")
    assert len(llm.requests()) == 1
    kinds = [(e.kind, e.data.get("stop_reason") or e.data.get("kind")) for e in read_events(tmp_path / "events.jsonl")]
    assert ("budget.exceeded", "wall_seconds") in kinds and ("run.end", "budget:wall_seconds") in kinds


async def test_work_that_is_no_call_is_cut_too_and_resume_runs_it_again(tmp_path: Path) -> None:
    spec = spec_from_dict(_spec({"fn": "tests.graph.nodes:slow_step", "next": "END"}))
    async with WorkflowRunner(spec, run_dir=tmp_path / "r") as runner:
        runner.context.budget = budget = Budget(wall_seconds=1.5)
        result = await runner.start({"task": "t"}, thread_id="t")
        ended = budget.used.wall_seconds
    assert ended < 2.5
    assert (result.status, result.failed_node, result.stop_reason) == ("failed", "second", "budget:wall_seconds")
    assert result.errors["second"].error.startswith("budget exceeded: wall_seconds")
    nodes.SLOW_NODE["seconds"] = 0.0
    try:
        async with WorkflowRunner(spec, run_dir=tmp_path / "r", context=RunHandles(budget=Budget())) as runner:
            assert (await runner.result("t")).stop_reason == "budget:wall_seconds"
            resumed = await runner.resume("t")
    finally:
        nodes.SLOW_NODE["seconds"] = 10.0
    assert resumed.status == "done" and resumed.state["summary"] == "slow step done"


async def test_no_node_starts_past_the_deadline_and_resume_begins_with_it(tmp_path: Path) -> None:
    """The first node ends with its own outcome when the deadline cuts what it waits for (as a search node
    does), within the run's grace: the next node, however fast, does not start; a resume starts it."""
    raw = _spec({"fn": "tests.graph.nodes:summarize", "next": "END"})
    raw["nodes"]["draft"]["fn"] = "tests.graph.nodes:draft_until_the_deadline"
    spec = spec_from_dict(raw)
    events = EventLog(tmp_path / "events.jsonl", run_id="r")
    async with WorkflowRunner(spec, run_dir=tmp_path / "r", context=RunHandles(events=events)) as runner:
        runner.context.budget = Budget(wall_seconds=1)
        result = await runner.start({"task": "t"}, thread_id="t")
    assert (result.status, result.failed_node, result.stop_reason) == ("failed", "second", "budget:wall_seconds")
    assert result.state["draft"] == "cut short" and "summary" not in result.state
    assert [e.node_id for e in read_events(tmp_path / "events.jsonl") if e.kind == "node.start"] == ["draft"]
    async with WorkflowRunner(spec, run_dir=tmp_path / "r", context=RunHandles(budget=Budget())) as runner:
        resumed = await runner.resume("t")
    events.close()
    assert resumed.status == "done" and resumed.state["summary"] == "summary of cut short"


def _repo(root: Path) -> Path:
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    for cmd in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"]):
        subprocess.run(["git", *cmd], cwd=root, check=True)
    return root


def test_run_wall_time_ends_the_run_with_its_events_checkpoints_and_diff(
    llm: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    llm.reset()
    edit = {"path": "calc.py", "old_str": "a - b", "new_str": "a + b"}
    llm.script({"tool_calls": [{"id": "c1", "name": "str_replace", "arguments": json.dumps(edit)}]},
               {"content": "still thinking", "delay": 60})
    workflow = tmp_path / "fix.yaml"
    workflow.write_text(yaml.safe_dump({
        "name": "fix", "state": {"task": {"type": "str"}, "code": {"type": "dict"}},
        "nodes": {"code": {"agent": "coder", "args": {"config": {"tools": ["editor"]}}, "next": "END"}},
    }))
    runs = tmp_path / "runs"
    started = time.monotonic()
    code = run(["run", str(workflow), "--workspace", str(_repo(tmp_path / "repo")), "--sandbox", "local",
                "-m", llm.spec("tiny"), "--wall-time", "8s", "-o", str(runs), "--json", "-i", '{"task": "fix add"}'])
    took = time.monotonic() - started
    captured = capsys.readouterr()
    assert took < 30, f"the run took {took:.1f}s: the 60 s call was not cut"
    assert code == 1  # a failed run, said so on stderr with how to continue
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert (result["status"], result["stop_reason"]) == ("failed", "budget:wall_seconds")
    assert "failed (budget:wall_seconds)" in captured.err and "--resume" in captured.err
    rdir = Path(result["run_dir"])
    assert "+    return a + b" in (rdir / "patch.diff").read_text()  # the edit made before the deadline
    assert (rdir / "checkpoints.db").is_file()
    usage = json.loads((rdir / "usage.json").read_text())
    assert usage["model_calls"] == 1 and usage["tool_calls"] == 1
    events = [json.loads(line) for line in (rdir / "events.jsonl").read_text().splitlines()]
    end = [e for e in events if e["kind"] == "agent.end"]
    assert end and end[-1]["data"]["stop_reason"] == "budget:wall_seconds"
    assert [e["data"]["stop_reason"] for e in events if e["kind"] == "run.end"] == ["budget:wall_seconds"]
