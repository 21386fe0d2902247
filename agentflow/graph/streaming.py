"""Model-token streaming for agent nodes: each reply's text goes to LangGraph's `custom` stream as
`{"node": NAME, "chunk": TEXT}` while the node still gets the full response (outside a running graph the
model is called as it is)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentflow.agents.stream import TokenForwardingModel
from agentflow.models.base import ChatModel, ChatRequest, ChatResponse


class TokenStreamingModel(TokenForwardingModel):
    """`TokenForwardingModel` whose tokens go to the run's stream, attributed to `node`."""

    def __init__(self, inner: ChatModel, node: str) -> None:
        super().__init__(inner, self._write)
        self.node = node
        self._writer: Callable[[Any], None] | None = None

    def _write(self, text: str) -> None:
        if self._writer is not None:
            self._writer({"node": self.node, "chunk": text})

    async def chat(self, request: ChatRequest) -> ChatResponse:
        from langgraph.config import get_stream_writer

        try:
            self._writer = get_stream_writer()
        except RuntimeError:  # called outside a running graph
            return await self.inner.chat(request)
        return await super().chat(request)
