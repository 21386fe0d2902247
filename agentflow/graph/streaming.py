"""Model-token streaming for agent nodes: a ChatModel wrapper that streams each reply and forwards its text
to LangGraph's `custom` stream as `{"node": NAME, "chunk": TEXT}` while returning the full response."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agentflow.models.base import ChatModel, ChatRequest, ChatResponse, StreamDelta


class TokenStreamingModel:
    """Wraps `inner`; `chat()` streams the reply (single-sample requests) so tokens reach the run's stream."""

    def __init__(self, inner: ChatModel, node: str) -> None:
        self.inner = inner
        self.node = node
        self.spec = inner.spec

    def __getattr__(self, name: str) -> Any:  # capabilities such as supports_tools come from the inner model
        return getattr(self.inner, name)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        if request.n != 1:
            return await self.inner.chat(request)
        from langgraph.config import get_stream_writer

        try:
            write = get_stream_writer()
        except RuntimeError:  # called outside a running graph
            return await self.inner.chat(request)
        final: ChatResponse | None = None
        async for delta in self.inner.stream(request):
            if delta.text:
                write({"node": self.node, "chunk": delta.text})
            if delta.response is not None:
                final = delta.response
        return final if final is not None else await self.inner.chat(request)

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        return self.inner.stream(request)

    async def aclose(self) -> None:
        await self.inner.aclose()
