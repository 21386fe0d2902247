"""A small real HTTP server speaking the OpenAI chat-completions API (JSON and SSE streaming) and a
minimal subset of Anthropic's Messages API, for the model tests. Run as a process:

    python fake_llm_server.py        # prints "PORT <n>" on its first line, serves on 127.0.0.1

Scripted behaviours: POST /_script with {"steps": [...]}; each model request consumes the next step.
A step is {"status": 503, "headers": {...}} (an error), {"drop": true} (close the connection without a
reply), or a reply {"content": "...", "tool_calls": [{"id", "name", "arguments": "<raw JSON text>"}],
"finish_reason": "...", "delay": seconds}. With no step left a request gets the default reply:
"echo: <last user text>" (n choices "echo: ... #i" when n > 1).
GET /_log returns every request seen ({"path", "body", "headers", "t"}) and the highest number of
requests in flight at once; POST /_reset clears script and log.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STATE: dict[str, Any] = {"steps": [], "log": [], "inflight": 0, "max_inflight": 0}
LOCK = threading.Lock()


def _words(value: Any) -> int:
    return len(json.dumps(value).split())


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, str):
            return content
        texts = [b.get("text", "") for b in content or [] if b.get("type") == "text"]
        if texts:
            return " ".join(texts)
    return ""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/_log":
            with LOCK:
                self._send_json(200, {"requests": STATE["log"], "max_inflight": STATE["max_inflight"]})
        else:
            self._send_json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path == "/_script":
            with LOCK:
                STATE["steps"] = list(body.get("steps", []))
            return self._send_json(200, {"ok": True})
        if self.path == "/_reset":
            with LOCK:
                STATE.update(steps=[], log=[], inflight=0, max_inflight=0)
            return self._send_json(200, {"ok": True})
        with LOCK:
            STATE["log"].append(
                {
                    "path": self.path,
                    "body": body,
                    "t": time.time(),
                    "headers": {
                        k.lower(): v
                        for k, v in self.headers.items()
                        if k.lower() in ("authorization", "x-api-key")
                    },
                }
            )
            step = STATE["steps"].pop(0) if STATE["steps"] else {}
            STATE["inflight"] += 1
            STATE["max_inflight"] = max(STATE["max_inflight"], STATE["inflight"])
        try:
            time.sleep(float(step.get("delay", 0)))
            if step.get("drop"):
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return None
            if "status" in step:
                return self._send_json(
                    step["status"],
                    step.get(
                        "body", {"error": {"message": f"scripted {step['status']}", "type": "scripted"}}
                    ),
                    step.get("headers"),
                )
            if self.path.endswith("/chat/completions"):
                return self._openai(body, step)
            if self.path.endswith("/messages"):
                return self._anthropic(body, step)
            return self._send_json(404, {"error": {"message": f"no route {self.path}"}})
        finally:
            with LOCK:
                STATE["inflight"] -= 1

    # --- OpenAI --------------------------------------------------------------------------------------
    def _openai(self, body: dict[str, Any], step: dict[str, Any]) -> None:
        n = int(body.get("n") or 1)
        base = step.get("content", f"echo: {_last_user_text(body.get('messages', []))}")
        if "content" not in step and step.get("tool_calls"):
            base = None
        contents = [base if n == 1 or base is None else f"{base} #{i}" for i in range(n)]
        calls = step.get("tool_calls", [])
        finish = step.get("finish_reason", "tool_calls" if calls else "stop")
        usage = {
            "prompt_tokens": _words(body.get("messages")),
            "completion_tokens": sum(_words(c) for c in contents),
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        model = body.get("model", "")
        if body.get("stream"):
            return self._openai_stream(model, contents, calls, finish, usage, body)
        choices = [
            {
                "index": i,
                "message": {
                    "role": "assistant",
                    "content": c,
                    "tool_calls": [
                        {
                            "id": tc["id"],
                            "type": "function",
                            "function": {"name": tc["name"], "arguments": tc["arguments"]},
                        }
                        for tc in calls
                    ]
                    or None,
                },
                "finish_reason": finish,
            }
            for i, c in enumerate(contents)
        ]
        self._send_json(
            200,
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": choices,
                "usage": usage,
            },
        )

    def _sse(self, events: list[Any]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for event in events:
            if isinstance(event, tuple):  # (event name, data) for Anthropic
                self.wfile.write(f"event: {event[0]}\ndata: {json.dumps(event[1])}\n\n".encode())
            else:
                self.wfile.write(
                    f"data: {event if isinstance(event, str) else json.dumps(event)}\n\n".encode()
                )
            self.wfile.flush()
        self.close_connection = True

    def _openai_stream(
        self,
        model: str,
        contents: list[str | None],
        calls: list[dict[str, Any]],
        finish: str,
        usage: dict[str, int],
        body: dict[str, Any],
    ) -> None:
        def chunk(choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> dict[str, Any]:
            return {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": choices,
                "usage": usage,
            }

        events: list[Any] = []
        for i, content in enumerate(contents):
            events.append(chunk([{"index": i, "delta": {"role": "assistant"}, "finish_reason": None}]))
            for piece in (content or "").split(" "):
                if content:
                    events.append(
                        chunk([{"index": i, "delta": {"content": piece + " "}, "finish_reason": None}])
                    )
            for k, tc in enumerate(calls):
                half = len(tc["arguments"]) // 2
                events.append(
                    chunk(
                        [
                            {
                                "index": i,
                                "delta": {
                                    "tool_calls": [
                                        {
                                            "index": k,
                                            "id": tc["id"],
                                            "type": "function",
                                            "function": {
                                                "name": tc["name"],
                                                "arguments": tc["arguments"][:half],
                                            },
                                        }
                                    ]
                                },
                                "finish_reason": None,
                            }
                        ]
                    )
                )
                events.append(
                    chunk(
                        [
                            {
                                "index": i,
                                "delta": {
                                    "tool_calls": [
                                        {"index": k, "function": {"arguments": tc["arguments"][half:]}}
                                    ]
                                },
                                "finish_reason": None,
                            }
                        ]
                    )
                )
            events.append(chunk([{"index": i, "delta": {}, "finish_reason": finish}]))
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append(chunk([], usage))
        events.append("[DONE]")
        self._sse(events)

    # --- Anthropic -----------------------------------------------------------------------------------
    def _anthropic(self, body: dict[str, Any], step: dict[str, Any]) -> None:
        text = step.get("content", f"echo: {_last_user_text(body.get('messages', []))}")
        if "content" not in step and step.get("tool_calls"):
            text = None
        calls = step.get("tool_calls", [])
        stop = "tool_use" if calls else step.get("finish_reason", "end_turn")
        usage = {
            "input_tokens": _words(body.get("messages")) + _words(body.get("system", "")),
            "output_tokens": _words(text),
        }
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        blocks += [
            {"type": "tool_use", "id": tc["id"], "name": tc["name"], "input": json.loads(tc["arguments"])}
            for tc in calls
        ]
        model = body.get("model", "")
        if not body.get("stream"):
            return self._send_json(
                200,
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": blocks,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                },
            )
        events: list[Any] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_1",
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 0},
                    },
                },
            )
        ]
        for i, block in enumerate(blocks):
            if block["type"] == "text":
                events.append(
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {"type": "text", "text": ""},
                        },
                    )
                )
                for piece in block["text"].split(" "):
                    events.append(
                        (
                            "content_block_delta",
                            {
                                "type": "content_block_delta",
                                "index": i,
                                "delta": {"type": "text_delta", "text": piece + " "},
                            },
                        )
                    )
            else:
                events.append(
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {
                                "type": "tool_use",
                                "id": block["id"],
                                "name": block["name"],
                                "input": {},
                            },
                        },
                    )
                )
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
                        },
                    )
                )
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        self._sse(events)


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
