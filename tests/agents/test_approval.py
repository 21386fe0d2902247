"""Approval bound to the call: a workflow pauses before a tool listed in `approve_tools`, showing the exact call;
the approval runs exactly that call, once; an approval for any other call is refused and asked about anew."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentflow.agents.approval import call_hash
from agentflow.graph import RunHandles, WorkflowRunner, spec_from_dict
from agentflow.models.base import ChatRequest
from agentflow.models.testing import FunctionModel, tool_call

WRITES: list[dict[str, Any]] = []
ARGS = {"path": "notes.txt", "text": "hello", "mode": "w"}


def write_note(path: str, text: str, mode: str) -> str:
    """Write a note (the effect the approval guards)."""
    WRITES.append({"path": path, "text": text, "mode": mode})
    return f"wrote {len(text)} characters to {path}"


def _model() -> FunctionModel:
    def reply(request: ChatRequest) -> Any:
        if any(m.role == "tool" for m in request.messages):
            return "the note is written"
        return tool_call("write_note", ARGS)

    return FunctionModel(reply)


def _spec(tmp_path: Path) -> Any:
    agent = tmp_path / "writer.yaml"
    agent.write_text("name: writer\nprompt: generic\ntools: []\napprove_tools: [write_note]\n")
    return spec_from_dict({
        "name": "approvals", "state": {"task": {"type": "str"}, "answer": {"type": "dict"}},
        "nodes": {"writer": {"agent": str(agent), "output": "answer", "next": "END",
                             "args": {"tools": [write_note]}}},
    })


@pytest.fixture(autouse=True)
def _clear() -> None:
    WRITES.clear()


async def _paused(runner: WorkflowRunner) -> Any:
    result = await runner.start({"task": "write the note"}, thread_id="t")
    assert result.status == "interrupted", result.errors
    return result


async def test_the_interrupt_shows_the_exact_call_and_the_approval_runs_it_once(tmp_path: Path) -> None:
    ctx = RunHandles(chat_model=_model())
    async with WorkflowRunner(_spec(tmp_path), run_dir=tmp_path / "r", context=ctx) as runner:
        paused = await _paused(runner)
        assert paused.interrupt["tool_call"] == {"name": "write_note", "arguments": ARGS}
        assert paused.interrupt["call_hash"] == call_hash("write_note", ARGS)
        assert "write_note(" in paused.interrupt["message"] and '"text": "hello"' in paused.interrupt["message"]
        assert WRITES == []  # nothing ran before the approval

        done = await runner.resume("t", approve=True)
        assert done.status == "done", done.errors
        again = await runner.resume("t", approve=True)  # a finished thread: nothing runs again
        assert again.status == "done"
    assert WRITES == [ARGS]
    kinds = [e.kind for e in ctx.events.events if e.kind.startswith("approval.")] if ctx.events else []
    assert kinds.count("approval.granted") == 1


def _changed() -> list[tuple[str, dict[str, Any]]]:
    """Calls that differ from the shown one in one way each: each needs its own approval."""
    variants: list[tuple[str, dict[str, Any]]] = [("write_notes", ARGS), ("read_note", ARGS)]
    for key, value in ARGS.items():
        variants.append(("write_note", {**ARGS, key: value + "x"}))
        variants.append(("write_note", {k: v for k, v in ARGS.items() if k != key}))
        variants.append(("write_note", {**ARGS, key: [value]}))
    variants.append(("write_note", {**ARGS, "extra": "1"}))
    variants.append(("write_note", {**ARGS, "text": "hello "}))
    variants.append(("write_note", {**ARGS, "text": "Hello"}))
    return variants


@pytest.mark.parametrize(("name", "arguments"), _changed())
async def test_an_approval_for_a_changed_call_is_refused(tmp_path: Path, name: str, arguments: dict) -> None:
    ctx = RunHandles(chat_model=_model())
    async with WorkflowRunner(_spec(tmp_path), run_dir=tmp_path / "r", context=ctx) as runner:
        await _paused(runner)
        refused = await runner.resume("t", approve=call_hash(name, arguments))
        assert refused.status == "interrupted"  # asked anew, showing the call that would run
        assert refused.interrupt["call_hash"] == call_hash("write_note", ARGS)
        assert WRITES == []
        done = await runner.resume("t", approve=True)
        assert done.status == "done", done.errors
    assert WRITES == [ARGS]
    events = [e for e in ctx.events.events if e.kind == "approval.refused"] if ctx.events else []
    assert events and events[0].data["approved_hash"] == call_hash(name, arguments)


async def test_key_order_is_not_a_different_call(tmp_path: Path) -> None:
    reordered = dict(reversed(list(ARGS.items())))
    async with WorkflowRunner(_spec(tmp_path), run_dir=tmp_path / "r", context=RunHandles(chat_model=_model())) as runner:
        await _paused(runner)
        done = await runner.resume("t", approve=call_hash("write_note", reordered))
    assert done.status == "done" and WRITES == [ARGS]


async def test_a_declined_call_is_not_run_and_the_model_is_told(tmp_path: Path) -> None:
    async with WorkflowRunner(_spec(tmp_path), run_dir=tmp_path / "r", context=RunHandles(chat_model=_model())) as runner:
        await _paused(runner)
        done = await runner.resume("t", edit={"task": "write the note"})
    assert done.status == "done" and WRITES == []


async def test_outside_a_workflow_a_call_needing_approval_is_not_run() -> None:
    from agentflow.agents import Agent, AgentConfig
    from agentflow.tools import ToolRegistry
    from agentflow.tools.decorator import Tool

    agent = Agent(AgentConfig(approve_tools=["*"]), model=_model(), tools=ToolRegistry([Tool(write_note)]))
    result = await agent.run("write the note")
    assert result.stop_reason == "done" and WRITES == []
    assert "needs a human's approval" in (result.messages[3].content or "")


async def test_an_approved_call_runs_once_when_its_node_runs_again(tmp_path: Path) -> None:
    """Two approvals in one node: resuming the second re-runs the node, and the first call replays from the
    run's tool journal instead of writing again."""
    second = {**ARGS, "text": "again"}

    def reply(request: ChatRequest) -> Any:
        done = sum(1 for m in request.messages if m.role == "tool")
        return [tool_call("write_note", ARGS), tool_call("write_note", second), "both written"][done]

    ctx = RunHandles(chat_model=FunctionModel(reply))
    async with WorkflowRunner(_spec(tmp_path), run_dir=tmp_path / "r", context=ctx) as runner:
        await _paused(runner)
        paused = await runner.resume("t", approve=True)
        assert paused.status == "interrupted" and paused.interrupt["tool_call"]["arguments"] == second
        assert WRITES == [ARGS]
        done = await runner.resume("t", approve=True)
        assert done.status == "done", done.errors
    assert WRITES == [ARGS, second]


@pytest.mark.parametrize("answers", ["right", "wrong_then_right", "always_wrong", "decline"])
async def test_an_applications_own_approver_is_bound_the_same_way(answers: str) -> None:
    from agentflow.agents import Agent, AgentConfig
    from agentflow.tools import ToolRegistry
    from agentflow.tools.decorator import Tool

    shown: list[dict[str, Any]] = []
    right = call_hash("write_note", ARGS)

    def approver(request: dict[str, Any]) -> dict[str, Any]:
        shown.append(request)
        wrong = answers == "always_wrong" or (answers == "wrong_then_right" and len(shown) == 1)
        if answers == "decline":
            return {"action": "reject"}
        return {"action": "approve", "call_hash": call_hash("write_note", {**ARGS, "text": "x"}) if wrong else right}

    agent = Agent(AgentConfig(approve_tools=["write_note"]), model=_model(), tools=ToolRegistry([Tool(write_note)]))
    await agent.run("write the note", approver=approver)

    assert shown[0]["tool_call"] == {"name": "write_note", "arguments": ARGS}
    assert WRITES == ([ARGS] if answers in ("right", "wrong_then_right") else [])
    assert len(shown) == {"right": 1, "wrong_then_right": 2, "always_wrong": 10, "decline": 1}[answers]
