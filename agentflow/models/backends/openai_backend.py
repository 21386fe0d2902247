"""`openai:MODEL` and `openai-compatible:BASE_URL#MODEL` (vLLM, llama.cpp server, any OpenAI-style server).

Uses the official `openai` SDK (imported when the first call is made) with its own retries turned off.
The message/tool conversion functions are shared with the LiteLLM backend, which speaks the same format.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlparse

from agentflow.models.backends.remote import RemoteModel
from agentflow.models.base import (
    ChatRequest,
    ChatResponse,
    Choice,
    FinishReason,
    Message,
    StreamDelta,
    TokenTrace,
    ToolCall,
    ToolSpec,
    Usage,
)
from agentflow.models.options import ModelOptions, hosted_api_key

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}


# --- conversion: ours -> OpenAI ----------------------------------------------------------------------
def _function(name: str, **fields: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, **fields}}


def to_openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content or ""})
        elif m.role == "assistant" and m.tool_calls:
            calls = [{"id": c.id, **_function(c.name, arguments=json.dumps(c.arguments))}
                     for c in m.tool_calls]
            out.append({"role": "assistant", "content": m.content, "tool_calls": calls})
        else:
            out.append({"role": m.role, "content": m.content or ""})
    return out


def to_openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [_function(t.name, description=t.description, parameters=t.parameters) for t in tools]


def request_kwargs(request: ChatRequest, *, max_tokens_field: str = "max_tokens") -> dict[str, Any]:
    """Keyword arguments of `chat.completions.create` for `request` (model excluded)."""
    kw: dict[str, Any] = {"messages": to_openai_messages(request.messages)}
    if request.tools:  # servers reject tool_choice without tools
        kw["tools"] = to_openai_tools(request.tools)
        if request.tool_choice is not None:
            kw["tool_choice"] = request.tool_choice
    if request.response_schema is not None:
        schema = {"name": request.response_schema_name or "response", "schema": request.response_schema}
        kw["response_format"] = {"type": "json_schema", "json_schema": schema}
    kw |= sampling_fields(request, max_tokens_field=max_tokens_field)
    if request.stop:
        kw["stop"] = request.stop
    return kw


def sampling_fields(request: ChatRequest, *, max_tokens_field: str = "max_tokens") -> dict[str, Any]:
    """The sampling settings `request` sets (`n` when not 1), as both completion endpoints take them."""
    kw: dict[str, Any] = {"n": request.n} if request.n != 1 else {}
    sent_as = {"temperature": "temperature", "top_p": "top_p", "seed": "seed", "max_tokens": max_tokens_field}
    for field, name in sent_as.items():
        value = getattr(request, field)
        if value is not None:
            kw[name] = value
    return kw


# --- conversion: OpenAI -> ours ----------------------------------------------------------------------
def parse_arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments as a dict, or an error message the model can read when they are not a JSON object."""
    if not raw or not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"arguments are not valid JSON ({exc.msg} at position {exc.pos}): {raw[:200]}"
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """Attribute or key access: SDK objects and LiteLLM's dict-like objects alike."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def tool_call_of(call_id: str, name: str, raw_arguments: str | None) -> ToolCall:
    """A tool call whose arguments arrived as JSON text (`arguments_error` set when they do not parse)."""
    args, error = parse_arguments(raw_arguments)
    return ToolCall(id=call_id, name=name, arguments=args, arguments_error=error)


def _usage(raw: Any) -> Usage:
    return Usage(input_tokens=_get(raw, "prompt_tokens", 0) or 0,
                 output_tokens=_get(raw, "completion_tokens", 0) or 0)


def token_trace(choice: Any, raw: Any, text: str | None, source: str) -> TokenTrace | None:
    """The sampled token ids and log-probs of an OpenAI-style choice, where the server gives them: per-token
    `logprobs.content[].logprob` (OpenAI, vLLM, llama-server) with `.id` (llama-server), or the choice's
    `token_ids` and the response's `prompt_token_ids` (vLLM's `return_token_ids`). None when it gives neither."""
    content = _get(_get(choice, "logprobs"), "content")
    entries = list(content or [])
    while entries and _get(entries[-1], "bytes") == []:
        # a token that wrote no text closes the reply: a stop string's (the server erases it) or an end token
        entries.pop()
    if content and not entries:
        content = []
    logprobs = [float(_get(e, "logprob")) for e in entries] if entries and all(
        isinstance(_get(e, "logprob"), (int, float)) for e in entries) else None
    ids = _get(choice, "token_ids")
    if ids is None and entries and all(isinstance(_get(e, "id"), int) for e in entries):
        ids = [int(_get(e, "id")) for e in entries]
    if content == [] and ids is None:  # log-probs given for no sampled token (the reply was only a stop string)
        ids, logprobs, text = [], [], ""
    prompt_ids = _get(raw, "prompt_token_ids")
    if ids is None and logprobs is None and prompt_ids is None:
        return None
    pieces = [_get(e, "bytes") for e in entries]
    if entries and all(isinstance(p, list) for p in pieces):
        # the tokens' own bytes: the text the ids are (the reply's text may hold part of a stop string)
        text = bytes(b for piece in pieces for b in piece).decode("utf-8", errors="replace")
    return TokenTrace(completion_text=text or "", completion_ids=list(ids) if ids is not None else None,
                      logprobs=logprobs, prompt_ids=list(prompt_ids) if prompt_ids is not None else None,
                      source=source).scrubbed()


def from_openai_response(raw: Any) -> ChatResponse:
    choices = []
    for c in sorted(_get(raw, "choices") or [], key=lambda c: _get(c, "index", 0) or 0):
        msg = _get(c, "message")
        calls = [tool_call_of(_get(tc, "id") or "", _get(_get(tc, "function"), "name") or "",
                              _get(_get(tc, "function"), "arguments"))
                 for tc in _get(msg, "tool_calls") or []]
        message = Message(role="assistant", content=_get(msg, "content"), tool_calls=calls)
        trace = token_trace(c, raw, _get(msg, "content"), "/v1/chat/completions logprobs")
        finish = _FINISH.get(_get(c, "finish_reason") or "", "unknown")
        choices.append(Choice(message=message, finish_reason=finish, trace=trace))
    return ChatResponse(choices=choices, usage=_usage(_get(raw, "usage")), model=_get(raw, "model", "") or "")


STREAM_SOURCE = "/v1/chat/completions stream logprobs"


class _StreamAccumulator:
    """Builds the final ChatResponse from OpenAI stream chunks (with each choice's token trace when the stream
    was asked for log-probs: `traced`)."""

    def __init__(self, traced: bool = False) -> None:
        self.traced = traced
        self.entries: dict[int, list[Any]] = {}
        self.text: dict[int, list[str]] = {}
        self.calls: dict[int, dict[int, dict[str, Any]]] = {}
        self.finish: dict[int, str] = {}
        self.usage = Usage()
        self.model = ""

    def add(self, chunk: Any) -> list[StreamDelta]:
        self.model = _get(chunk, "model", "") or self.model
        if _get(chunk, "usage") is not None:
            self.usage = _usage(_get(chunk, "usage"))
        deltas = []
        for c in _get(chunk, "choices") or []:
            index = _get(c, "index", 0) or 0
            self.text.setdefault(index, [])
            delta = _get(c, "delta")
            piece = _get(delta, "content") if delta is not None else None
            if piece:
                self.text[index].append(piece)
                deltas.append(StreamDelta(index=index, text=piece))
            for tc in (_get(delta, "tool_calls") or []) if delta is not None else []:
                slot = self.calls.setdefault(index, {}).setdefault(_get(tc, "index", 0) or 0,
                                                                   {"id": "", "name": "", "args": []})
                fn = _get(tc, "function")
                slot["id"] = _get(tc, "id") or slot["id"]
                if fn is not None:
                    slot["name"] = _get(fn, "name") or slot["name"]
                    slot["args"].append(_get(fn, "arguments") or "")
            if _get(c, "finish_reason"):
                self.finish[index] = _get(c, "finish_reason")
            self.entries.setdefault(index, []).extend(_get(_get(c, "logprobs"), "content") or [])
        return deltas

    def trace(self, index: int, text: str | None) -> TokenTrace | None:
        """The choice's token trace from the log-probs its chunks carried (None when none were asked for).
        llama-server attaches a token's log-prob to a chunk only when the token changed the message: a token
        it held back (the start of a possible stop string) can be missing, which the caller checks."""
        if not self.traced:
            return None
        entries = self.entries.get(index, [])
        trace = token_trace({"logprobs": {"content": entries}}, {}, text, STREAM_SOURCE)
        if trace is None or (not entries and text):
            return TokenTrace(completion_text=text or "", source=STREAM_SOURCE,
                              missing="streamed call: the stream carried no log-probs for this reply")
        return trace

    def response(self) -> ChatResponse:
        choices = []
        for index in sorted(self.text.keys() | self.calls.keys()):
            slots = sorted(self.calls.get(index, {}).items())
            calls = [tool_call_of(slot["id"], slot["name"], "".join(slot["args"])) for _, slot in slots]
            text = "".join(self.text.get(index, [])) or None
            choices.append(Choice(message=Message(role="assistant", content=text, tool_calls=calls),
                                  finish_reason=_FINISH.get(self.finish.get(index, ""), "unknown"),
                                  trace=self.trace(index, text)))
        return ChatResponse(choices=choices, usage=self.usage, model=self.model)


# --- the backend -----------------------------------------------------------------------------------
class OpenAIChatModel(RemoteModel):
    """OpenAI's API or any server that speaks it."""

    trace_tokens = False
    """Ask for the sampled tokens' log-probs on every call (`Choice.trace`); local llama-server models do."""
    takes_raw = True
    completion_schema_field: str = "json_schema"
    """`/v1/completions` request field for guided JSON: `json_schema` for llama-server; vLLM accepts `guided_json`."""

    def __init__(self, spec: str, model: str, options: ModelOptions, *, compatible_base_url: str | None = None) -> None:
        super().__init__(spec, model, options)
        self.compatible = compatible_base_url is not None
        self.base_url = compatible_base_url or options.base_url
        self.key_env = "AGENTFLOW_API_KEY or OPENAI_API_KEY" if self.compatible else "OPENAI_API_KEY"

    def _prices(self) -> tuple[float, float] | None:
        if self.compatible and self.options.price_in_per_mtok is None and self.options.price_out_per_mtok is None:
            host = urlparse(self.base_url or "").hostname or ""
            return (0.0, 0.0) if host in _LOOPBACK else None  # a server on this machine costs nothing
        return super()._prices()

    def _api_key(self) -> str:
        if self.options.api_key is not None:
            return self.options.api_key
        if self.compatible:
            # local servers usually need no key; the SDK insists on a non-empty string
            return os.environ.get("AGENTFLOW_API_KEY") or os.environ.get("OPENAI_API_KEY") or "no-key"
        return hosted_api_key("openai", self.spec, None)

    def client(self) -> Any:
        if self._client is None:
            import openai

            self._client = openai.AsyncOpenAI(api_key=self._api_key(), base_url=self.base_url, max_retries=0,
                                              timeout=self.options.timeout_s)
        return self._client

    def _kwargs(self, request: ChatRequest) -> dict[str, Any]:
        kw = request_kwargs(request, max_tokens_field="max_tokens" if self.compatible else "max_completion_tokens")
        kw["model"] = self.model
        if self.trace_tokens:  # the sampled tokens' log-probs (and, from llama-server, their ids)
            kw["logprobs"], kw["top_logprobs"] = True, 1
        if request.extra:
            kw["extra_body"] = dict(request.extra)
        return kw

    async def _chat_once(self, request: ChatRequest) -> ChatResponse:
        if request.raw:
            return await self._text_completion(request, request.raw_prompt, request.stop, strip=False)
        raw = await self.client().chat.completions.create(**self._kwargs(request))
        return from_openai_response(raw)

    async def _text_completion(self, request: ChatRequest, prompt: str, stop: list[str], *, strip: bool) -> ChatResponse:
        """`request`'s sampling settings sent to `/v1/completions` with `prompt`; each sample's text stripped
        when `strip` (an answer after a template's "Answer:"), else as generated (a raw prompt's continuation)."""
        kw: dict[str, Any] = {"model": self.model, "prompt": prompt, "stop": stop, **sampling_fields(request)}
        extra = dict(request.extra)
        if self.trace_tokens:
            extra.setdefault("n_probs", 1)  # llama-server: the sampled tokens with their ids and log-probs
        if request.response_schema is not None:
            extra[self.completion_schema_field] = request.response_schema
        if extra:
            kw["extra_body"] = extra
        raw = await self.client().completions.create(**kw)
        choices = []
        for c in sorted(raw.choices, key=lambda c: c.index or 0):
            trace = token_trace(c, raw, c.text, "/v1/completions n_probs") if self.trace_tokens else None
            if trace is None and self.trace_tokens and not (c.text or "").strip():
                # llama-server gives no log-probs to a reply that was only a stop string, or only whitespace held
                # back with one: the message keeps the stripped text (none), and so does its trace
                trace = TokenTrace(completion_ids=[], logprobs=[], source="/v1/completions n_probs")
            if trace is not None:
                trace.prompt_text = prompt
                trace = trace.scrubbed()
            text = c.text or ""
            choices.append(Choice(message=Message(role="assistant", content=text.strip() if strip else text),
                                  finish_reason=_FINISH.get(c.finish_reason or "", "unknown"), trace=trace))
        return ChatResponse(choices=choices, usage=_usage(raw.usage), model=raw.model or self.model)

    def _stream_kwargs(self, request: ChatRequest) -> dict[str, Any]:
        kw = self._kwargs(request)
        kw["stream"] = True
        if self.options.stream_usage:
            kw["stream_options"] = {"include_usage": True}
        return kw

    async def _stream_once(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        kw = self._stream_kwargs(request)
        acc = _StreamAccumulator(traced=bool(kw.get("logprobs")))
        stream = await self.client().chat.completions.create(**kw)
        try:
            async for chunk in stream:
                for delta in acc.add(chunk):
                    yield delta
        finally:
            await stream.close()
        yield StreamDelta(response=acc.response())
