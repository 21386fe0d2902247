"""Context that stays within the window: no request larger than the model's window is ever sent; compaction
(old tool outputs dropped, then old turns) runs before a call would exceed it and is recorded; a prompt that
cannot fit stops the run with `stop_reason: context` instead of being sent."""

from __future__ import annotations

from typing import Any

import pytest

from agentflow.agents import Agent, AgentConfig
from agentflow.agents.context import ContextConfig, prompt_counter
from agentflow.events import EventLog
from agentflow.models.base import ChatRequest
from agentflow.models.testing import FunctionModel, tool_call
from agentflow.tools import ToolContext, ToolRegistry
from agentflow.tools.decorator import Tool


def _agent(window: int, output_chars: int, calls: int, *, policy: list[str] | None = None,
           declared: bool = True) -> tuple[Agent, FunctionModel]:
    def read_page(page: int) -> str:
        """Read one page of a long document."""
        return f"page {page}: " + "lorem ipsum " * (output_chars // 12)

    asked = iter(range(calls + 1))

    def reply(request: ChatRequest) -> Any:  # counts its own calls: compaction may drop turns it saw
        done = next(asked, calls)
        return tool_call("read_page", page=done) if done < calls else "summary written"

    model = FunctionModel(reply)
    context: dict[str, Any] = {"keep_last": 2, "chars_per_token": 4.0}
    if policy is not None:
        context["policy"] = policy
    if declared:
        model.context_window = window  # type: ignore[attr-defined]
    else:
        context["window"] = window
    config = AgentConfig(name="reader", step_limit=calls + 2, max_tokens=64, context=ContextConfig(**context))
    return Agent(config, model=model, tools=ToolRegistry([Tool(read_page)])), model


@pytest.mark.parametrize("declared", [True, False])
@pytest.mark.parametrize(("window", "output_chars", "calls"), [
    (600, 400, 8), (800, 1200, 6), (1500, 3000, 10), (1000, 200, 30), (2000, 4000, 4),
])
async def test_no_request_exceeds_the_window(window: int, output_chars: int, calls: int, declared: bool) -> None:
    agent, model = _agent(window, output_chars, calls, declared=declared)
    events = EventLog(None)

    result = await agent.run("summarize the document", ctx=ToolContext(events=events))

    assert result.stop_reason == "done", result.error
    count = prompt_counter(model, 4.0)
    for request in model.requests:
        assert await count(request) + 64 <= window
    full = sum(len(m.content or "") for m in result.messages if m.role == "tool")
    assert full >= calls * output_chars * 0.9  # the result keeps the whole conversation
    compacted = [e.data for e in events.events if e.kind == "agent.compacted"]
    needed = full / 4.0 + 64 > window
    assert bool(compacted) == needed
    assert all(c["fits"] and c["tokens_after"] + 64 <= window < c["tokens_before"] + 64 for c in compacted)


async def test_old_turns_go_when_dropping_outputs_is_not_enough() -> None:
    agent, model = _agent(700, 40, 40)
    events = EventLog(None)

    result = await agent.run("summarize the document", ctx=ToolContext(events=events))

    assert result.stop_reason == "done"
    policies = {p for e in events.events if e.kind == "agent.compacted" for p in e.data["policy"]}
    assert policies == {"drop_tool_outputs", "keep_ends"}
    last = model.requests[-1].messages
    assert last[0].role == "system" and last[1].role == "user"  # the prompt and the task stay
    ids = {c.id for m in last if m.role == "assistant" for c in m.tool_calls}
    assert all(m.tool_call_id in ids for m in last if m.role == "tool")  # every result still has its call


@pytest.mark.parametrize("policy", [[], ["drop_tool_outputs"], ["drop_tool_outputs", "keep_ends"]])
async def test_a_prompt_that_cannot_fit_is_not_sent(policy: list[str]) -> None:
    agent, model = _agent(100, 40, 3, policy=policy)  # the system prompt alone is larger

    result = await agent.run("summarize the document " * 20)

    assert result.stop_reason == "context" and model.requests == []
    assert "context window of 100 tokens" in (result.error or "")


async def test_without_a_known_window_nothing_is_compacted() -> None:
    agent, model = _agent(100, 400, 3)
    del model.context_window  # type: ignore[attr-defined]
    events = EventLog(None)

    result = await agent.run("summarize", ctx=ToolContext(events=events))

    assert result.stop_reason == "done" and not any(e.kind == "agent.compacted" for e in events.events)
