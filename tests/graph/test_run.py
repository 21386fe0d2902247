"""Running workflows on a real SQLite checkpoint file: routes, parallel joins, subgraphs, interrupts,
streaming, resume from a fresh runner, journaled tool calls and events."""

from __future__ import annotations

import json
import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from pydantic import BaseModel

from agentflow.errors import UserError
from agentflow.events import EventLog, read_events
from agentflow.graph import (
    END,
    RunHandles,
    Workflow,
    WorkflowRunner,
    load_workflow,
    spec_from_dict,
)
from agentflow.graph.run.runner import StreamEvent


class LoopState(TypedDict, total=False):
    count: int
    status: str
    log: Annotated[list, operator.add]


def bump(state: LoopState) -> dict[str, Any]:
    n = state.get("count", 0) + 1
    return {"count": n, "status": "done" if n >= 3 else "again", "log": [f"bump {n}"]}


def left(state: LoopState) -> dict[str, Any]:
    return {"log": ["left"]}


def right(state: LoopState) -> dict[str, Any]:
    return {"log": ["right"]}


def join(state: LoopState) -> dict[str, Any]:
    return {"status": f"joined {len(state['log'])}"}


async def test_python_workflow_with_conditional_route(tmp_path: Path) -> None:
    wf = Workflow("loop", state=LoopState).node("bump", bump)
    wf.route("bump", on="status", cases={"again": "bump", "done": END})
    async with WorkflowRunner(wf.spec, run_dir=tmp_path) as runner:
        result = await runner.start({"count": 0})
    assert result.status == "done"
    assert result.state["count"] == 3
    assert result.state["log"] == ["bump 1", "bump 2", "bump 3"]
    assert (tmp_path / "checkpoints.db").stat().st_size > 0


async def test_route_on_callable_and_default(tmp_path: Path) -> None:
    wf = Workflow("w", state=LoopState).node("bump", bump)
    wf.route("bump", on=lambda s: s["count"] < 2, cases={True: "bump"}, default=END)
    async with WorkflowRunner(wf.spec, run_dir=tmp_path) as runner:
        result = await runner.start({"count": 0})
    assert result.state["count"] == 2


async def test_parallel_fan_out_and_join_with_reducer(tmp_path: Path) -> None:
    wf = Workflow("par", state=LoopState).node("start", lambda s: {"log": ["start"]})
    wf.node("left", left).node("right", right).node("join", join)
    wf.parallel("start", ["left", "right"], join="join").edge("join", END)
    async with WorkflowRunner(wf.spec, run_dir=tmp_path) as runner:
        result = await runner.start({})
    assert result.state["log"][0] == "start"
    assert sorted(result.state["log"][1:]) == ["left", "right"]
    assert result.state["status"] == "joined 3"  # the join ran once, after both branches


async def test_subgraph_runs_as_one_node(tmp_path: Path) -> None:
    inner = Workflow("inner", state=LoopState).node("bump", bump)
    inner.route("bump", on="status", cases={"again": "bump", "done": END})
    outer = Workflow("outer", state=LoopState).subgraph("counting", inner).node("after", join)
    outer.edge("counting", "after").edge("after", END)
    events: list[StreamEvent] = []
    async with WorkflowRunner(outer.spec, run_dir=tmp_path) as runner:
        result = await runner.start({"count": 0}, on_event=events.append)
    assert result.state["count"] == 3
    assert result.state["status"] == "joined 3"
    assert any(
        e.namespace and e.namespace[0].startswith("counting") for e in events
    )  # subgraph updates stream


async def test_yaml_demo_workflow(tmp_path: Path) -> None:
    spec = load_workflow("demo")
    async with WorkflowRunner(spec, run_dir=tmp_path) as runner:
        result = await runner.start({"topic": "graphs", "rounds": 3})
    state = result.state
    assert state["count"] == 3 and state["status"] == "done"
    assert sorted(state["notes"][1:3]) == ["examples for graphs", "outline of graphs"]
    assert state["summary"] == "graphs: 6 notes after 3 rounds"


async def test_unknown_input_key_is_a_user_error(tmp_path: Path) -> None:
    async with WorkflowRunner(load_workflow("demo"), run_dir=tmp_path) as runner:
        with pytest.raises(UserError, match="'bogus'"):
            await runner.start({"bogus": 1})


def review_workflow() -> Workflow:
    class S(TypedDict, total=False):
        draft: str
        final: str

    wf = Workflow("review", state=S).node("write", lambda s: {"draft": "v1"})
    wf.interrupt("approve", "Publish this draft?", show=["draft"])
    wf.node("publish", lambda s: {"final": s["draft"].upper()})
    return wf.edge("write", "approve").edge("approve", "publish").edge("publish", END)


async def test_interrupt_approve_from_a_fresh_runner(tmp_path: Path) -> None:
    spec = review_workflow().spec
    async with WorkflowRunner(spec, run_dir=tmp_path) as runner:
        paused = await runner.start({}, thread_id="t1")
    assert paused.status == "interrupted"
    assert paused.interrupt == {"node": "approve", "message": "Publish this draft?", "state": {"draft": "v1"}}
    assert "final" not in paused.state
    async with WorkflowRunner(spec, run_dir=tmp_path) as runner:  # a new process would do the same
        with pytest.raises(UserError, match="waits for approval at node 'approve'"):
            await runner.resume("t1")
        done = await runner.resume("t1", approve=True)
    assert done.status == "done" and done.state["final"] == "V1"


async def test_interrupt_edit_changes_state(tmp_path: Path) -> None:
    async with WorkflowRunner(review_workflow().spec, run_dir=tmp_path) as runner:
        await runner.start({}, thread_id="t2")
        done = await runner.resume("t2", edit={"draft": "edited"})
    assert done.state["final"] == "EDITED"


async def test_interrupt_before_breakpoint(tmp_path: Path) -> None:
    wf = (
        Workflow("w", state=LoopState)
        .node("a", lambda s: {"count": 1})
        .node("b", lambda s: {"count": s["count"] * 10})
    )
    wf.edge("a", "b").edge("b", END)
    wf.interrupt_before = ["b"]
    async with WorkflowRunner(wf.spec, run_dir=tmp_path) as runner:
        paused = await runner.start({}, thread_id="t")
        assert paused.status == "interrupted" and paused.next == ["b"]
        with pytest.raises(UserError, match="before node 'b'"):
            await runner.resume("t")
        done = await runner.resume("t", edit={"count": 7})
    assert done.state["count"] == 70


async def test_streaming_updates_and_custom_chunks(tmp_path: Path) -> None:
    async def talk(state: LoopState, ctx: Any) -> dict[str, Any]:
        for token in ["hel", "lo"]:
            ctx.stream(token)
        return {"status": "spoke"}

    wf = (
        Workflow("s", state=LoopState)
        .node("talk", talk)
        .node("bump", bump)
        .edge("talk", "bump")
        .edge("bump", END)
    )
    seen: list[StreamEvent] = []
    async with WorkflowRunner(wf.spec, run_dir=tmp_path) as runner:
        await runner.start({"count": 0}, on_event=seen.append)
    chunks = [e.data["chunk"] for e in seen if e.mode == "custom"]
    updates = [next(iter(e.data)) for e in seen if e.mode == "updates"]
    assert chunks == ["hel", "lo"]
    assert updates == ["talk", "bump"]


async def test_call_tool_is_journaled_and_evented(tmp_path: Path) -> None:
    calls: list[int] = []

    def counter(n: int) -> int:
        """Count a call.

        Args:
            n: a number
        """
        calls.append(n)
        return n * 2

    async def node(state: LoopState, ctx: Any) -> dict[str, Any]:
        a = await ctx.call_tool("counter", {"n": 1})
        b = await ctx.call_tool("counter", {"n": 1})  # same args, next call index: runs again
        return {"log": [a.text, b.text, str(a.replayed)]}

    wf = Workflow("t", state=LoopState).node("node", node).edge("node", END)
    events = EventLog(tmp_path / "events.jsonl", run_id="r")
    ctx = RunHandles(events=events, tools={"counter": counter})
    async with WorkflowRunner(wf.spec, run_dir=tmp_path, context=ctx) as runner:
        result = await runner.start({}, thread_id="th")
    events.close()
    assert calls == [1, 1]
    assert result.state["log"] == ["2", "2", "False"]
    kinds = [e.kind for e in read_events(tmp_path / "events.jsonl")]
    assert kinds.count("tool.call") == 2 and "node.start" in kinds and "node.end" in kinds

    # The journal replays completed calls for the same thread/node/step/index instead of re-running them.
    from agentflow.graph.run.context import NodeContext
    from agentflow.tools.journal import SqliteToolJournal

    with SqliteToolJournal(tmp_path / "checkpoints.db") as journal:
        rt = RunHandles(journal=journal, tools={"counter": counter})
        again = NodeContext(
            rt, "node", {"configurable": {"thread_id": "th"}, "metadata": {"langgraph_step": 1}}
        )
        replay = await again.call_tool("counter", {"n": 1})
    assert replay.replayed and replay.text == "2" and calls == [1, 1]


async def test_unknown_tool_is_a_user_error(tmp_path: Path) -> None:
    async def node(state: LoopState, ctx: Any) -> dict[str, Any]:
        await ctx.call_tool("missing", {})
        return {}

    wf = Workflow("t", state=LoopState).node("node", node).edge("node", END)
    async with WorkflowRunner(wf.spec, run_dir=tmp_path) as runner:
        with pytest.raises(UserError, match="unknown tool 'missing'"):
            await runner.start({})


async def test_step_limit_is_a_user_error(tmp_path: Path) -> None:
    wf = Workflow("w", state=LoopState).node("bump", lambda s: {"count": s.get("count", 0) + 1})
    wf.route("bump", on=lambda s: "x", cases={"x": "bump"}, default=END)
    wf.step_limit = 5
    async with WorkflowRunner(wf.spec, run_dir=tmp_path) as runner:
        with pytest.raises(UserError, match="step limit"):
            await runner.start({})


async def test_memory_checkpointer_needs_no_files(tmp_path: Path) -> None:
    wf = Workflow("w", state=LoopState).node("bump", bump).edge("bump", END)
    async with WorkflowRunner(wf.spec, checkpointer="memory") as runner:
        assert (await runner.start({"count": 5})).state["count"] == 6
    assert json.dumps([]) == "[]"


class Counter(BaseModel):
    count: int = 0
    status: str = ""
    log: Annotated[list[str], operator.add] = []


def bump_model(state: Counter) -> dict[str, Any]:
    n = state.count + 1
    return {"count": n, "status": "done" if n >= 2 else "again", "log": [f"m{n}"]}


async def test_pydantic_state_model(tmp_path: Path) -> None:
    wf = Workflow("pyd", state=Counter).node("bump", bump_model)
    wf.route("bump", on="status", cases={"again": "bump", "done": END})
    assert wf.spec.state["log"].reducer == "add"
    async with WorkflowRunner(wf.spec, run_dir=tmp_path) as runner:
        result = await runner.start({"count": 0})
    assert result.state["count"] == 2 and result.state["log"] == ["m1", "m2"]


async def test_yaml_subgraph_by_relative_path(tmp_path: Path) -> None:
    (tmp_path / "inner.yaml").write_text(
        "name: inner\nstate: {rounds: {type: int}, count: {type: int}, status: {type: str},"
        " notes: {type: list, reducer: append}, topic: {type: str}}\n"
        "nodes:\n  d:\n    fn: agentflow.workflows.demo:draft\n"
        "    route: {on: status, cases: {again: d, done: END}}\n"
    )
    (tmp_path / "outer.yaml").write_text(
        "name: outer\nstate: {rounds: {type: int, default: 2}, count: {type: int, default: 0}, status: {type: str},"
        " notes: {type: list, reducer: append}, topic: {type: str, default: t}, summary: {type: str}}\n"
        "nodes:\n  drafting: {subgraph: inner.yaml, next: sum}\n"
        "  sum: {fn: 'agentflow.workflows.demo:summarize', next: END}\n"
    )
    spec = load_workflow(tmp_path / "outer.yaml")
    async with WorkflowRunner(spec, run_dir=tmp_path / "run") as runner:
        result = await runner.start({})
    assert result.state["summary"] == "t: 2 notes after 2 rounds"


async def test_yaml_tool_node_uses_a_tool_pack(tmp_path: Path) -> None:
    spec = spec_from_dict(
        {
            "name": "calcflow",
            "state": {"expr": {"type": "str"}, "result": {"type": "any"}},
            "tools": ["calc"],
            "nodes": {
                "calc": {
                    "tool": "calculate",
                    "args": {"expression": "{expr}"},
                    "output": "result",
                    "next": "END",
                }
            },
        }
    )
    async with WorkflowRunner(spec, run_dir=tmp_path) as runner:  # the runner loads the spec's packs
        result = await runner.start({"expr": "6*7"}, thread_id="c")
    assert result.state["result"] == "42"


async def test_yaml_route_with_conditions(tmp_path: Path) -> None:
    spec = spec_from_dict(
        {
            "name": "cond",
            "state": {
                "count": {"type": "int", "default": 0},
                "rounds": {"type": "int", "default": 4},
                "status": {"type": "str"},
                "notes": {"type": "list", "reducer": "append"},
                "topic": {"type": "str", "default": "t"},
            },
            "nodes": {
                "d": {
                    "fn": "agentflow.workflows.demo:draft",
                    "route": {"when": {"count >= 3 and status != 'done'": "END"}, "default": "d"},
                }
            },
        }
    )
    async with WorkflowRunner(spec, run_dir=tmp_path) as runner:
        result = await runner.start({})
    assert result.state["count"] == 3 and result.state["status"] == "again"
