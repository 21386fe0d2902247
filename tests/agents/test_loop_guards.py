"""Loop guards: a scripted model that repeats itself is stopped with `stop_reason: loop` after the configured
count (or nudged first), and one that polls a tool whose result changes is never taken for a loop."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from agentflow.agents import Agent, AgentConfig
from agentflow.agents.loops import LoopGuardConfig
from agentflow.events import EventLog
from agentflow.models.base import ChatRequest, Message
from agentflow.models.testing import FunctionModel, tool_call
from agentflow.tools import ToolContext, ToolRegistry
from agentflow.tools.decorator import Tool


def _registry(status: Callable[[], str]) -> tuple[ToolRegistry, list[str]]:
    ran: list[str] = []

    def check_status(job: str) -> str:
        """Status of a job."""
        ran.append(job)
        return status()

    def run_command(cmd: str) -> str:
        """Run a command."""
        ran.append(cmd)
        raise RuntimeError("exit 1: no such file")

    return ToolRegistry([Tool(check_status), Tool(run_command)]), ran


def _agent(model: FunctionModel, tools: ToolRegistry, *, protocol: str = "native", **guard: Any) -> Agent:
    config = AgentConfig(name="looper", tools=[], step_limit=40, tool_protocol=protocol,  # type: ignore[arg-type]
                         loop_guard=LoopGuardConfig(**guard))
    return Agent(config, model=model, tools=tools)


def _calls_then_answer(calls: list[Any]) -> Callable[[ChatRequest], Any]:
    replies = iter(calls)

    def reply(request: ChatRequest) -> Any:
        return next(replies, "done")

    return reply


def _text_call(name: str, args: dict[str, Any]) -> str:
    import json

    return f"```tool\n{json.dumps({'name': name, 'arguments': args})}\n```"


@pytest.mark.parametrize("protocol", ["native", "text"])
@pytest.mark.parametrize("limit", [2, 3, 5, 7])
async def test_the_same_call_with_the_same_result_stops_at_the_limit(limit: int, protocol: str) -> None:
    tools, ran = _registry(lambda: "pending")
    call = (lambda: _text_call("check_status", {"job": "a"})) if protocol == "text" else (
        lambda: tool_call("check_status", job="a"))
    model = FunctionModel(lambda request: call())
    events = EventLog(None)
    agent = _agent(model, tools, protocol=protocol, repeat_limit=limit, action="stop")

    result = await agent.run("wait for job a", ctx=ToolContext(events=events))

    assert result.stop_reason == "loop" and result.error_kind == "loop"
    assert len(ran) == limit and result.steps == limit
    loops = [e.data for e in events.events if e.kind == "agent.loop"]
    assert [(e["loop"], e["count"], e["action"]) for e in loops] == [("repeated_call", limit, "stop")]


@pytest.mark.parametrize("shape", ["one_per_step", "all_in_one_step", "alternating"])
async def test_five_repeats_stop_whatever_their_shape(shape: str) -> None:
    tools, ran = _registry(lambda: "pending")
    same = tool_call("check_status", job="a")
    other = tool_call("check_status", job="b")
    script: list[Any] = {
        "one_per_step": [same] * 5,
        "all_in_one_step": [[same.model_copy() for _ in range(5)]],
        "alternating": [same, other] * 5,
    }[shape]
    agent = _agent(FunctionModel(_calls_then_answer(script)), tools, action="stop")

    result = await agent.run("wait")

    assert result.stop_reason == "loop"
    assert ran.count("a") == 5


@pytest.mark.parametrize("calls", [5, 12, 30])
async def test_polling_a_tool_whose_result_changes_is_never_a_loop(calls: int) -> None:
    progress = itertools.count()
    tools, ran = _registry(lambda: f"{next(progress)}% done")
    script = [tool_call("check_status", job="a") for _ in range(calls)]
    agent = _agent(FunctionModel(_calls_then_answer(script)), tools, action="stop", repeat_limit=2)

    result = await agent.run("wait for job a")

    assert result.stop_reason == "done" and result.output is not None
    assert len(ran) == calls


@pytest.mark.parametrize("limit", [2, 3, 4])
async def test_the_same_failing_command_stops_at_the_failure_limit(limit: int) -> None:
    tools, ran = _registry(lambda: "")
    model = FunctionModel(lambda request: tool_call("run_command", cmd="make test"))
    events = EventLog(None)
    agent = _agent(model, tools, failure_limit=limit, repeat_limit=limit + 5, action="stop")

    result = await agent.run("build", ctx=ToolContext(events=events))

    assert result.stop_reason == "loop" and len(ran) == limit
    assert [e.data["loop"] for e in events.events if e.kind == "agent.loop"] == ["repeated_failure"]


async def test_a_nudge_reaches_the_model_then_the_next_repeat_stops() -> None:
    tools, ran = _registry(lambda: "pending")
    model = FunctionModel(lambda request: tool_call("check_status", job="a"))
    events = EventLog(None)
    agent = _agent(model, tools, repeat_limit=3, action="nudge", max_nudges=1, nudge_message="STOP {count}")

    result = await agent.run("wait", ctx=ToolContext(events=events))

    assert result.stop_reason == "loop" and len(ran) == 4
    nudges = [m.content for m in result.messages if m.role == "user" and (m.content or "").startswith("STOP")]
    assert nudges == ["STOP 3"]
    assert [e.data["action"] for e in events.events if e.kind == "agent.loop"] == ["nudge", "stop"]


async def test_a_nudged_agent_that_changes_course_goes_on() -> None:
    tools, ran = _registry(lambda: "pending")

    def reply(request: ChatRequest) -> Any:
        nudged = any(m.role == "user" and "repeating" in (m.content or "") for m in request.messages)
        return "giving up on a" if nudged else tool_call("check_status", job="a")

    result = await _agent(FunctionModel(reply), tools, repeat_limit=3).run("wait")

    assert result.stop_reason == "done" and len(ran) == 3


async def test_the_same_unreadable_answer_stops_at_the_answer_limit() -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        value: int

    model = FunctionModel(lambda request: Message.assistant("I think it is seven"))
    model.reads_response_schema = False  # type: ignore[misc]
    config = AgentConfig(name="looper", output_retries=10, loop_guard=LoopGuardConfig(answer_limit=3, action="stop"))
    result = await Agent(config, model=model, output_type=Answer).run("what is 3+4?")

    assert result.stop_reason == "loop" and result.steps == 3


async def test_disabled_guards_leave_the_step_limit_to_end_the_run() -> None:
    tools, ran = _registry(lambda: "pending")
    model = FunctionModel(lambda request: tool_call("check_status", job="a"))
    agent = _agent(model, tools, enabled=False)
    agent.config.step_limit = 8

    result = await agent.run("wait")

    assert result.stop_reason == "step_limit" and len(ran) == 8


def test_every_guard_field_is_documented() -> None:
    for name, field in LoopGuardConfig.model_fields.items():
        assert field.description, name


@pytest.mark.parametrize(("action", "status"), [("stop", "done"), ("end_branch", "failed")])
async def test_end_branch_fails_the_node_even_where_failures_route(tmp_path, action: str, status: str) -> None:
    from agentflow.graph import RunHandles, WorkflowRunner, spec_from_dict

    config = {"tools": [], "output_retries": 10, "loop_guard": {"answer_limit": 2, "action": action}}
    spec = spec_from_dict({
        "name": "loops", "state": {"task": {"type": "str"}, "critique": {"type": "dict"},
                                   "topic": {"type": "str"}, "summary": {"type": "str"}},
        "nodes": {
            "review": {"agent": "critic", "args": {"input": {"task": "task", "summary": "task"}, "config": config},
                       "output": "critique", "on_error": "fallback", "next": "END"},
            "fallback": {"fn": "agentflow.workflows.demo:summarize", "next": "END"},
        },
    })
    model = FunctionModel(lambda request: Message.assistant("not json"))
    model.reads_response_schema = False  # type: ignore[misc]
    async with WorkflowRunner(spec, run_dir=tmp_path / "r", context=RunHandles(chat_model=model)) as runner:
        result = await runner.start({"task": "check it", "topic": "x"}, thread_id="t")

    assert result.status == status, result.errors
    assert result.errors["review"].reason == "loop"
