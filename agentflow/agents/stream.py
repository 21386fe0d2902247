"""Watching an agent run: `AgentEvent`s for a callback (`Agent.run(..., on_event=f)`) or an async iterator
(`Agent.run_stream`), without building a `ToolContext` or an `EventLog`.

    async for event in agent.run_stream("fix the bug"):
        if event.kind == "token":
            print(event.text, end="", flush=True)
        elif event.kind == "result":
            result = event.result
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agentflow.models.base import ChatModel, ChatRequest, ChatResponse, ModelWrapper

if TYPE_CHECKING:
    from agentflow.agents.result import AgentResult

EventKind = Literal["token", "step", "tool", "result"]


@dataclass
class AgentEvent:
    """One thing that happened in a run: a piece of model text (`token`), a finished model call (`step`), a
    finished tool call (`tool`), or the end (`result`, always last)."""

    kind: EventKind
    text: str = ""
    """`token`: the new text; `step`: the reply's text; `tool`: the tool's result text."""
    step: int = 0
    """The model call this event belongs to (1-based)."""
    tool: str | None = None
    """`tool`: the tool's name."""
    ok: bool | None = None
    """`tool`: whether the call succeeded."""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """`step`: the tool calls the model asked for ({name, arguments})."""
    result: AgentResult | None = None
    """`result`: the run's AgentResult."""


OnAgentEvent = Callable[[AgentEvent], Any]


class TokenForwardingModel(ModelWrapper):
    """Wraps `inner`: each single-sample `chat()` is streamed and its text passed to `emit` as `token` events,
    while the caller still gets the whole response."""

    def __init__(self, inner: ChatModel, emit: Callable[[str], None]) -> None:
        super().__init__(inner)
        self.emit = emit

    async def chat(self, request: ChatRequest) -> ChatResponse:
        if request.n != 1:
            return await self.inner.chat(request)
        final: ChatResponse | None = None
        async for delta in self.inner.stream(request):
            if delta.text:
                self.emit(delta.text)
            if delta.response is not None:
                final = delta.response
        return final if final is not None else await self.inner.chat(request)


__all__ = ["AgentEvent", "EventKind", "OnAgentEvent", "TokenForwardingModel"]
