"""The one async chat interface every model backend implements, and its request/response types.

Backends live beside this file and are picked by a model spec string (see `spec.py`). Nothing here imports
a provider SDK.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

Role = Literal["system", "user", "assistant", "tool"]
T = TypeVar("T")


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
    raw: bool = False
    """The one user message is the whole prompt, sent as it is to the server's text-completion endpoint
    (`/v1/completions`, no chat template), and each sample's text comes back as generated (not stripped): a
    model's own format, such as a code model's fill-in-the-middle tokens. OpenAI-compatible servers
    (llama-server, vLLM) take it; other backends refuse it (`UserError`)."""

    @model_validator(mode="after")
    def _raw_is_one_prompt(self) -> ChatRequest:
        if self.raw and (len(self.messages) != 1 or self.messages[0].role != "user" or self.tools
                         or self.response_schema is not None):
            raise ValueError("a raw request is one user message (the prompt text), without tools or a response schema")
        return self

    @property
    def raw_prompt(self) -> str:
        """A raw request's prompt text (its one message's)."""
        return self.messages[0].content or ""


class Usage(BaseModel):
    """Token use and cost of one call (all samples)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    """Cost where the model's prices are known, else None."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        """The use of both calls; their cost when both costs are known."""
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return Usage(input_tokens=self.input_tokens + other.input_tokens,
                     output_tokens=self.output_tokens + other.output_tokens, cost_usd=cost)


FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "error", "unknown"]


class TokenTrace(BaseModel):
    """One sample at the token level, as far as the backend gives it (training data: see
    docs/concepts/training-data.md). A field the backend cannot give is None."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    prompt_text: str | None = None
    """The exact text the model read (the chat template or few-shot template applied), when known."""
    prompt_ids: list[int] | None = None
    """Token ids of the prompt as the server tokenized it (special tokens included)."""
    completion_text: str = ""
    """The generated text exactly as decoded, before any trimming."""
    completion_ids: list[int] | None = None
    """Token ids the model sampled, in order."""
    logprobs: list[float] | None = None
    """Log-probability of each sampled token (one per completion id) under the model's distribution."""
    source: str = ""
    """Where the ids and log-probs came from (endpoint and fields), for whoever reads them later."""
    missing: str | None = None
    """Why the completion's ids or log-probs are absent (None when the backend gave them)."""

    def scrubbed(self) -> TokenTrace:
        """This trace as it may be written: when redaction changes its text (it held a secret), the text is
        redacted and the ids and log-probs, which would spell the secret out, are dropped."""
        from agentflow.secrets import redact

        prompt = redact(self.prompt_text) if self.prompt_text is not None else None
        completion = redact(self.completion_text)
        if prompt == self.prompt_text and completion == self.completion_text:
            return self
        return TokenTrace(prompt_text=prompt, completion_text=completion, source=self.source,
                          missing="ids and log-probs dropped: the text held a secret")


class Choice(BaseModel):
    """One sample."""

    message: Message
    finish_reason: FinishReason = "unknown"
    trace: TokenTrace | None = None
    """Token ids and log-probs of this sample when the backend gives them (local llama-server models do)."""


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
    identity: dict[str, str] = Field(default_factory=dict)
    """What model answered, as precisely as the backend knows: e.g. `backend`, `model`, `file_sha256` (the
    GGUF file of a local model)."""

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


class ModelWrapper:
    """Base of a model that wraps `inner`: the spec and capabilities (`profile`, `supports_tools`, ...) are
    `inner`'s, and what a subclass does not change passes through to it."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.spec = inner.spec

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (a copy under construction): no attribute, not a recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        return await self.inner.chat(request)

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        return self.inner.stream(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def as_deltas(response: ChatResponse) -> AsyncIterator[StreamDelta]:
    """A whole response as a stream: each sample's text in one piece, then the response."""
    for i, choice in enumerate(response.choices):
        if choice.message.content:
            yield StreamDelta(index=i, text=choice.message.content)
    yield StreamDelta(response=response)


def wrapped_models(model: object) -> Iterator[object]:
    """`model` and the models it wraps (`.inner`), outermost first."""
    current: object = model
    for _ in range(8):
        yield current
        current = getattr(current, "inner", None)
        if current is None:
            return


def declared(model: object, name: str, kind: type[T]) -> T | None:
    """The first attribute `name` of type `kind` of `model` or a model it wraps, outermost first."""
    values = (getattr(level, name, None) for level in wrapped_models(model))
    return next((value for value in values if isinstance(value, kind)), None)


def declared_tool_calling(model: object) -> bool | None:
    """Whether a model says it calls tools: its `supports_tools`, else its serving profile's `tool_calling`,
    looked up through the models it wraps; None when nothing says."""
    for level in wrapped_models(model):
        flag = getattr(level, "supports_tools", None)
        if flag is None:
            flag = getattr(getattr(level, "profile", None), "tool_calling", None)
        if isinstance(flag, bool):
            return flag
    return None
