"""`anthropic:MODEL` through the official `anthropic` SDK (imported on first call, its retries off).

Differences from the OpenAI format handled here: the system prompt is a separate field, tool calls and
tool results are `tool_use` / `tool_result` content blocks, `max_tokens` is required, there is no `n`
(samples are requested concurrently by `RemoteModel`) and no JSON-schema mode (the schema is put into the
system prompt and `chat_structured` parses the JSON reply).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agentflow.models.backends.openai_backend import tool_call_of
from agentflow.models.backends.remote import RemoteModel
from agentflow.models.base import (
    ChatRequest,
    ChatResponse,
    Choice,
    FinishReason,
    Message,
    StreamDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from agentflow.models.options import hosted_api_key
from agentflow.models.templates import MODEL_PROMPTS

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
_TOOL_CHOICE = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}


def schema_instruction(schema: dict[str, Any]) -> str:
    return MODEL_PROMPTS.render("schema_instruction.j2", schema=json.dumps(schema, sort_keys=True))


def to_anthropic(request: ChatRequest) -> tuple[str, list[dict[str, Any]]]:
    """(system prompt, messages) in the Messages API format; consecutive same-role turns are merged."""
    system = [m.content for m in request.messages if m.role == "system" and m.content]
    if request.response_schema is not None:
        system.append(schema_instruction(request.response_schema))
    turns: list[dict[str, Any]] = []
    for m in request.messages:
        if m.role == "system":
            continue
        blocks: list[dict[str, Any]]
        if m.role == "tool":
            role = "user"
            blocks = [{"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": m.content or ""}]
        elif m.role == "assistant":
            role = "assistant"
            blocks = [{"type": "text", "text": m.content}] if m.content else []
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls]
        else:
            role, blocks = "user", [{"type": "text", "text": m.content or ""}]
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return "\n\n".join(system), turns


def to_anthropic_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]


def from_anthropic(raw: Any) -> ChatResponse:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in raw.content or []:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            args = block.input if isinstance(block.input, dict) else {}
            calls.append(ToolCall(id=block.id, name=block.name, arguments=args))
    message = Message(role="assistant", content="".join(texts) or None, tool_calls=calls)
    usage = Usage(input_tokens=raw.usage.input_tokens or 0, output_tokens=raw.usage.output_tokens or 0)
    finish = _FINISH.get(raw.stop_reason or "", "unknown")
    return ChatResponse(choices=[Choice(message=message, finish_reason=finish)], usage=usage, model=raw.model or "")


class AnthropicChatModel(RemoteModel):
    native_n = False
    key_env = "ANTHROPIC_API_KEY"

    def client(self) -> Any:
        if self._client is None:
            import anthropic

            key = hosted_api_key("anthropic", self.spec, self.options.api_key)
            self._client = anthropic.AsyncAnthropic(api_key=key, base_url=self.options.base_url, max_retries=0,
                                                    timeout=self.options.timeout_s)
        return self._client

    def _kwargs(self, request: ChatRequest) -> dict[str, Any]:
        system, messages = to_anthropic(request)
        kw: dict[str, Any] = {"model": self.model, "messages": messages,
                              "max_tokens": request.max_tokens or self.options.default_max_tokens}
        if system:
            kw["system"] = system
        if request.tools:
            kw["tools"] = to_anthropic_tools(request.tools)
            if request.tool_choice is not None:
                kw["tool_choice"] = _TOOL_CHOICE[request.tool_choice]
        if request.stop:
            kw["stop_sequences"] = request.stop
        # this SDK no longer types sampling parameters; the API still takes them for models that allow them
        extra = {k: v for k, v in (("temperature", request.temperature), ("top_p", request.top_p)) if v is not None}
        extra.update(request.extra)
        if extra:
            kw["extra_body"] = extra
        return kw

    async def _chat_once(self, request: ChatRequest) -> ChatResponse:
        return from_anthropic(await self.client().messages.create(**self._kwargs(request)))

    async def _stream_once(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        kw = self._kwargs(request)
        kw["stream"] = True
        texts: list[str] = []
        tools: dict[int, dict[str, Any]] = {}
        usage = Usage()
        model, stop = "", ""
        stream = await self.client().messages.create(**kw)
        async for event in stream:
            if event.type == "message_start":
                model = event.message.model or ""
                usage.input_tokens = event.message.usage.input_tokens or 0
            elif event.type == "content_block_start" and event.content_block.type == "tool_use":
                tools[event.index] = {"id": event.content_block.id, "name": event.content_block.name, "json": []}
            elif event.type == "content_block_delta":
                if event.delta.type == "text_delta":
                    texts.append(event.delta.text)
                    yield StreamDelta(text=event.delta.text)
                elif event.delta.type == "input_json_delta" and event.index in tools:
                    tools[event.index]["json"].append(event.delta.partial_json)
            elif event.type == "message_delta":
                stop = event.delta.stop_reason or stop
                usage.output_tokens = event.usage.output_tokens or usage.output_tokens
        slots = [slot for _, slot in sorted(tools.items())]
        calls = [tool_call_of(slot["id"], slot["name"], "".join(slot["json"])) for slot in slots]
        message = Message(role="assistant", content="".join(texts) or None, tool_calls=calls)
        choice = Choice(message=message, finish_reason=_FINISH.get(stop, "unknown"))
        yield StreamDelta(response=ChatResponse(choices=[choice], usage=usage, model=model))
