"""Models for testing your own agents and workflows without a provider, a server or a cassette
(docs/concepts/testing.md): `FunctionModel(fn)`, whose function answers each call, and `TestModel()`, which
needs no code. Both record every request (`.requests`), stream their text word by word and report a usage
estimated from word counts at no cost. As spec strings: `test` / `test:seed=1,call_tools=none`, and
`function:module:callable` (or `function:path/to/file.py:callable`).
"""

from __future__ import annotations

import inspect
import itertools
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel

from agentflow.errors import UserError
from agentflow.models.base import ChatRequest, ChatResponse, Choice, Message, StreamDelta, ToolCall, Usage
from agentflow.models.schema_data import sample

Reply: TypeAlias = str | BaseModel | Mapping[str, Any] | ToolCall | Sequence[ToolCall] | Message | ChatResponse
"""What a `FunctionModel` function may return (see `FunctionModel`)."""
ModelFunction: TypeAlias = Callable[[ChatRequest], Reply | Awaitable[Reply]]

NO_TOOL_CALLS = "success (no tool calls)"
"""`TestModel`'s plain-text answer when it called no tool and has no output schema or `text`."""

_WORD = re.compile(r"\S+\s*|\s+")


def tool_call(name: str, arguments: Mapping[str, Any] | None = None, /, **kwargs: Any) -> ToolCall:
    """A tool call for a `FunctionModel` reply: `tool_call("search", query="x")` or
    `tool_call("search", {"query": "x"})`. The model gives it an id."""
    return ToolCall(id="", name=name, arguments={**(arguments or {}), **kwargs})


def _words(text: str | None) -> int:
    return len((text or "").split())


def estimate_usage(request: ChatRequest, choices: Sequence[Choice]) -> Usage:
    """Tokens counted as words (message text, tool definitions and call arguments), at no cost."""
    def size(message: Message) -> int:
        return _words(message.content) + sum(_words(json.dumps(c.arguments)) + 1 for c in message.tool_calls)

    prompt = sum(size(m) for m in request.messages) + sum(_words(t.model_dump_json()) for t in request.tools)
    return Usage(input_tokens=prompt, output_tokens=sum(size(c.message) for c in choices), cost_usd=0.0)


class _RecordingBase:
    """What both test models share: the request log, ids for tool calls, word-by-word streaming."""

    supports_tools = True
    """Tools are offered through the API (an agent uses native tool calling with these models)."""
    reads_response_schema = True
    """An agent sends its output schema on every call (even without `structured_output`)."""
    spec: str

    def __init__(self) -> None:
        self.requests: list[ChatRequest] = []
        """Every request received, oldest first."""
        self._ids = itertools.count(1)

    @property
    def last_request(self) -> ChatRequest:
        """The latest request (an AssertionError when there was none, for use in tests)."""
        assert self.requests, f"{self.spec} was never called"
        return self.requests[-1]

    def _respond(self, request: ChatRequest, messages: list[Message]) -> ChatResponse:
        choices = []
        for message in messages:
            for call in message.tool_calls:
                if not call.id:
                    call.id = f"call_{next(self._ids)}"
            choices.append(Choice(message=message, finish_reason="tool_calls" if message.tool_calls else "stop"))
        return ChatResponse(choices=choices, usage=estimate_usage(request, choices), model=self.spec)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        raise NotImplementedError

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        response = await self.chat(request)
        for index, choice in enumerate(response.choices):
            for piece in _WORD.findall(choice.message.content or ""):
                yield StreamDelta(index=index, text=piece)
        yield StreamDelta(response=response)

    async def aclose(self) -> None:
        return None


class FunctionModel(_RecordingBase):
    """A model whose replies come from `fn(request)`, sync or async: a string (text), a pydantic object or a
    dict (a JSON answer), `tool_call(...)` or a list of them, or a whole `Message` / `ChatResponse`; it may
    raise (e.g. `ModelError`) to test failure paths. A request for `n` samples calls it `n` times."""

    def __init__(self, fn: ModelFunction, *, spec: str | None = None) -> None:
        super().__init__()
        if not callable(fn):
            raise UserError(f"FunctionModel needs a function, got {type(fn).__name__}")
        self.fn = fn
        self.spec = spec or f"function:{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', 'fn')}"

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        messages = []
        for _ in range(request.n):
            reply = self.fn(request)
            if inspect.isawaitable(reply):
                reply = await reply
            if isinstance(reply, ChatResponse):
                if request.n == 1:
                    return reply
                reply = reply.message
            messages.append(self._message(reply))
        return self._respond(request, messages)

    def _message(self, reply: Any) -> Message:
        if isinstance(reply, Message):
            return reply.model_copy(deep=True)
        if isinstance(reply, str):
            return Message.assistant(reply)
        if isinstance(reply, ToolCall):
            return Message.assistant(None, [reply.model_copy()])
        if isinstance(reply, Sequence) and reply and all(isinstance(c, ToolCall) for c in reply):
            return Message.assistant(None, [c.model_copy() for c in reply])
        if isinstance(reply, BaseModel):
            return Message.assistant(reply.model_dump_json())
        if isinstance(reply, Mapping):
            return Message.assistant(json.dumps(reply, default=str))
        raise UserError(f"{self.spec} returned {type(reply).__name__}; a FunctionModel function returns a str, a "
                        "pydantic object or dict (JSON answer), tool_call(...) or a list of them, a Message or a "
                        "ChatResponse")


class TestModel(_RecordingBase):
    """A model that calls the offered tools once with made-up arguments, then answers from the output schema.

    `call_tools`: "all" (default), "none", or the names of the tools to call. `text`: the final answer when
    there is no output schema (default: the tools' results as JSON, or "success (no tool calls)").
    `output`: the final answer when there is one (default: data made up from the schema). `seed` varies the
    made-up values."""

    __test__ = False  # pytest: a class, not a test case

    def __init__(self, *, call_tools: Literal["all", "none"] | Sequence[str] = "all", text: str | None = None,
                 output: BaseModel | Mapping[str, Any] | None = None, seed: int = 0, spec: str = "test") -> None:
        super().__init__()
        self.call_tools = call_tools
        self.text = text
        self.output = output
        self.seed = seed
        self.spec = spec

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        return self._respond(request, [self._reply(request) for _ in range(request.n)])

    def _reply(self, request: ChatRequest) -> Message:
        called = {c.name for m in request.messages if m.role == "assistant" for c in m.tool_calls}
        wanted = [t for t in request.tools if self.call_tools == "all" or (
            self.call_tools != "none" and t.name in self.call_tools)]
        pending = [t for t in wanted if t.name not in called]
        if pending and request.tool_choice != "none":
            return Message.assistant(None, [
                ToolCall(id="", name=t.name, arguments=sample(t.parameters, seed=self.seed)) for t in pending
            ])
        if self.output is not None:
            data = self.output.model_dump(mode="json") if isinstance(self.output, BaseModel) else self.output
            return Message.assistant(json.dumps(data, default=str))
        if request.response_schema is not None:
            return Message.assistant(json.dumps(sample(request.response_schema, seed=self.seed)))
        if self.text is not None:
            return Message.assistant(self.text)
        results = {m.name or "?": m.content for m in request.messages if m.role == "tool"}
        return Message.assistant(json.dumps(results) if results else NO_TOOL_CALLS)


def parse_test_options(text: str, spec: str) -> dict[str, Any]:
    """`seed=1,call_tools=none` (tool names joined by `+`) -> TestModel keyword arguments."""
    options: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or key not in ("seed", "call_tools"):
            raise UserError(f"bad model spec {spec!r}: unknown option {item!r}",
                            hint="test specs take seed=N and call_tools=all|none|NAME+NAME, e.g. test:seed=1")
        if key == "seed":
            if not value.lstrip("-").isdigit():
                raise UserError(f"bad model spec {spec!r}: seed must be an integer, got {value!r}")
            options["seed"] = int(value)
        else:
            options["call_tools"] = value if value in ("all", "none") else [v for v in value.split("+") if v]
    return options


def load_function(target: str, spec: str) -> FunctionModel:
    """`module:callable` or `path/to/file.py:callable` -> a FunctionModel over that callable."""
    from agentflow._modules import import_object

    fn = import_object(target, kind="callable", expected="function:MODULE:CALLABLE, e.g. function:tests.fakes:reply "
                       "or function:fakes.py:reply")
    if not callable(fn):
        raise UserError(f"{spec}: {target} is not callable")
    return FunctionModel(fn, spec=spec)


__all__ = ["NO_TOOL_CALLS", "FunctionModel", "ModelFunction", "Reply", "TestModel", "estimate_usage", "tool_call"]
