"""The one async chat interface every model backend implements, and its request/response types.

Backends live beside this file and are picked by a model spec string (see `spec.py`). Nothing here imports
a provider SDK.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(BaseModel):
    """A tool call the model asked for."""

    id: str
    """Provider's call id (tool results refer to it)."""
    name: str
    """Tool name."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Arguments as parsed JSON. `arguments_error` is set instead when the model sent invalid JSON."""
    arguments_error: str | None = None
    """Why the raw arguments could not be parsed (returned to the model as the tool result)."""


class Message(BaseModel):
    """One chat message."""

    role: Role
    content: str | None = None
    """Text content (None for an assistant message that only calls tools)."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Tool calls of an assistant message."""
    tool_call_id: str | None = None
    """For role=tool: the call this is the result of."""
    name: str | None = None
    """For role=tool: the tool's name."""

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role="system", content=text)

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role="user", content=text)

    @classmethod
    def assistant(cls, text: str | None, tool_calls: list[ToolCall] | None = None) -> Message:
        return cls(role="assistant", content=text, tool_calls=tool_calls or [])

    @classmethod
    def tool(cls, call_id: str, name: str, text: str) -> Message:
        return cls(role="tool", content=text, tool_call_id=call_id, name=name)


class ToolSpec(BaseModel):
    """A tool definition as the model sees it (provider-neutral)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON schema of the arguments object."""


class ChatRequest(BaseModel):
    """Everything a backend needs for one call."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    tool_choice: Literal["auto", "required", "none"] | None = None
    response_schema: dict[str, Any] | None = None
    """JSON schema the reply must follow (structured output). `chat_structured` fills it from a pydantic model."""
    response_schema_name: str | None = None
    n: int = Field(default=1, ge=1)
    """Number of samples."""
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    stop: list[str] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)
    """Backend-specific request fields, passed through."""


class Usage(BaseModel):
    """Token use and cost of one call (all samples)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    """Cost where the model's prices are known, else None."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "error", "unknown"]


class Choice(BaseModel):
    """One sample."""

    message: Message
    finish_reason: FinishReason = "unknown"


class ChatResponse(BaseModel):
    """The result of one call."""

    choices: list[Choice]
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    """Model name as the provider reported it."""
    latency_s: float = 0.0
    """Wall time of the call, retries included."""
    cached: bool = False
    """True when served from the response cache or a replay cassette."""

    @property
    def message(self) -> Message:
        return self.choices[0].message

    @property
    def text(self) -> str:
        return self.choices[0].message.content or ""


class StreamDelta(BaseModel):
    """A piece of a streamed reply. The last item of a stream has `response` set."""

    index: int = 0
    """Sample index."""
    text: str = ""
    response: ChatResponse | None = None


@runtime_checkable
class ChatModel(Protocol):
    """An async chat model. Implementations must be safe to share across tasks."""

    spec: str
    """The model spec string this model was built from (e.g. `openai:gpt-4o-mini`)."""

    async def chat(self, request: ChatRequest) -> ChatResponse: ...

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]: ...

    async def aclose(self) -> None: ...


def declared_tool_calling(model: object) -> bool | None:
    """Whether a model says it calls tools: its `supports_tools`, else its serving profile's `tool_calling`,
    looked up through the models it wraps (`.inner`); None when nothing says."""
    current: object = model
    for _ in range(8):
        flag = getattr(current, "supports_tools", None)
        if flag is None:
            flag = getattr(getattr(current, "profile", None), "tool_calling", None)
        if isinstance(flag, bool):
            return flag
        current = getattr(current, "inner", None)
        if current is None:
            break
    return None


def declared_response_schema(model: object) -> bool:
    """Whether a model asks for the output schema on every request (`reads_response_schema`, looked up through
    the models it wraps): test models answer from it, so an agent sends it even without `structured_output`."""
    current: object = model
    for _ in range(8):
        flag = getattr(current, "reads_response_schema", None)
        if isinstance(flag, bool):
            return flag
        current = getattr(current, "inner", None)
        if current is None:
            break
    return False
