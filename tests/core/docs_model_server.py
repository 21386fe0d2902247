"""A loopback server speaking OpenAI's chat-completions API (JSON and SSE streaming), answered by agentflow's
`TestModel`: the docs' lines that name a hosted model (`-m openai:gpt-4o-mini`) run as written, with
`OPENAI_BASE_URL` pointing here. The request goes through the real OpenAI SDK and backend; the answers are
the test model's (tools called once with arguments made up from their schemas, then data made up from the
response schema), so a run is deterministic and costs nothing."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentflow.models.backends.openai_backend import parse_arguments
from agentflow.models.base import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec
from agentflow.models.testing import TestModel


def _message(m: dict[str, Any]) -> Message:
    calls = []
    for c in m.get("tool_calls") or []:
        args, error = parse_arguments(c["function"].get("arguments"))
        calls.append(ToolCall(id=c.get("id", ""), name=c["function"]["name"], arguments=args,
                              arguments_error=error))
    content = m.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(part.get("text", "") for part in content)
    return Message(role=m["role"] if m["role"] != "developer" else "system", content=content,
                   tool_calls=calls, tool_call_id=m.get("tool_call_id"))


def _schema_in_instructions(messages: list[Message]) -> dict[str, Any] | None:
    """The JSON schema a system prompt gives for the answer (an agent without structured output puts it there,
    as a JSON object on lines of its own), so the test model answers in it as a hosted model would."""
    text = "\n".join(m.content or "" for m in messages if m.role == "system")
    for start in reversed([i + 1 for i, c in enumerate(text) if c == "\n" and text[i + 1 : i + 2] == "{"]):
        try:
            found, _ = json.JSONDecoder().raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(found, dict) and "properties" in found:
            return found
    return None


def chat_request(body: dict[str, Any]) -> ChatRequest:
    """The `ChatRequest` an OpenAI chat-completions body stands for."""
    schema = (body.get("response_format") or {}).get("json_schema") or {}
    messages = [_message(m) for m in body["messages"]]
    return ChatRequest(
        messages=messages,
        tools=[ToolSpec(name=t["function"]["name"], description=t["function"].get("description", ""),
                        parameters=t["function"].get("parameters") or {"type": "object", "properties": {}})
               for t in body.get("tools") or []],
        tool_choice=body.get("tool_choice") if isinstance(body.get("tool_choice"), str) else None,
        response_schema=schema.get("schema") or _schema_in_instructions(messages),
        response_schema_name=schema.get("name"),
        n=body.get("n") or 1,
    )


def _openai_message(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id or f"call_{i}", "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for i, c in enumerate(message.tool_calls)
        ]
    return out


def completion(response: ChatResponse, model: str) -> dict[str, Any]:
    """The OpenAI chat-completions JSON of `response`."""
    return {
        "id": "chatcmpl-docs", "object": "chat.completion", "created": 0, "model": model,
        "choices": [
            {"index": i, "message": _openai_message(c.message),
             "finish_reason": "tool_calls" if c.message.tool_calls else "stop"}
            for i, c in enumerate(response.choices)
        ],
        "usage": {"prompt_tokens": response.usage.input_tokens, "completion_tokens": response.usage.output_tokens,
                  "total_tokens": response.usage.input_tokens + response.usage.output_tokens},
    }


def _chunks(full: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The whole answer as stream chunks: one per choice, then the usage."""
    head = {k: full[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    for choice in full["choices"]:
        delta = dict(choice["message"])
        for i, call in enumerate(delta.get("tool_calls") or []):
            call["index"] = i
        yield head | {"choices": [{"index": choice["index"], "delta": delta,
                                   "finish_reason": choice["finish_reason"]}]}
    yield head | {"choices": [], "usage": full["usage"]}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        if not self.path.endswith("/chat/completions"):
            self.send_error(404)
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        response = asyncio.run(TestModel().chat(chat_request(body)))
        full = completion(response, body.get("model", "test"))
        if not body.get("stream"):
            data = json.dumps(full).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for chunk in _chunks(full):
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")


@contextmanager
def serving() -> Iterator[str]:
    """Serve on 127.0.0.1 (a free port) until the block ends; yields the base URL (`.../v1`)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
