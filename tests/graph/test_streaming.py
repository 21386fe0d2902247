"""Streaming from any node: `runner.stream(...)` yields an agent's tokens, model calls, tool calls and results
and node starts and ends as they happen, from a node nested in a subgraph, while a real loopback
OpenAI-compatible server (in this file) sends its reply slowly, chunk by chunk."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypedDict

import pytest

from agentflow.errors import UserError
from agentflow.graph import END, Workflow, WorkflowRunner
from agentflow.graph.run.context import RunHandles

ANSWER = '{"summary": "looked the word up: it means to flow", "done": true}'
PIECES = [ANSWER[i:i + 8] for i in range(0, len(ANSWER), 8)]


class State(TypedDict, total=False):
    task: str
    code: dict[str, Any]
    after: str


def lookup(word: str) -> str:
    """Look a word up.

    Args:
        word: the word
    """
    return f"{word}: to flow"


class SlowServer:
    """OpenAI chat completions over SSE: the first request gets a tool call, the next ones `ANSWER`, one
    chunk every `delay` seconds. `sent` holds when each answer chunk left (time.monotonic)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.requests = 0
        self.sent: list[float] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                chunks = server.tool_call() if server.requests == 1 else server.answer()
                for delta, finish in chunks:
                    self._send({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                    if "content" in delta:
                        server.sent.append(time.monotonic())
                        time.sleep(server.delay)
                self._send({"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 10}})
                self.wfile.write(b"data: [DONE]\n\n")
                self.close_connection = True

            def _send(self, body: dict[str, Any]) -> None:
                chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "slow", **body}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True

    @staticmethod
    def tool_call() -> list[tuple[dict[str, Any], str | None]]:
        call = {"index": 0, "id": "call1", "type": "function", "function": {"name": "lookup", "arguments": ""}}
        return [({"role": "assistant"}, None), ({"tool_calls": [call]}, None),
                ({"tool_calls": [{"index": 0, "function": {"arguments": '{"word": "stream"}'}}]}, None),
                ({}, "tool_calls")]

    @staticmethod
    def answer() -> list[tuple[dict[str, Any], str | None]]:
        return [({"role": "assistant"}, None), *[({"content": p}, None) for p in PIECES], ({}, "stop")]

    @property
    def spec(self) -> str:
        return f"openai-compatible:http://127.0.0.1:{self.httpd.server_address[1]}/v1#slow"


@pytest.fixture
def slow_server() -> Iterator[SlowServer]:
    server = SlowServer(delay=0.1)
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


def _workflow() -> Workflow:
    inner = Workflow("inner", state=State).agent("code", "coder", output="code", config={"tools": []},
                                                 tools=[lookup])
    inner.edge("code", END)
    outer = Workflow("outer", state=State).subgraph("solve", inner).node("after", lambda s: {"after": "yes"},
                                                                         writes=["after"])
    return outer.edge("solve", "after").edge("after", END)


async def test_an_agent_nested_in_a_subgraph_streams_tokens_and_tool_calls_live(
    tmp_path: Path, slow_server: SlowServer
) -> None:
    from agentflow.models.spec import load_model

    context = RunHandles(chat_model=load_model(slow_server.spec))
    seen: list[tuple[Any, float]] = []
    async with WorkflowRunner(_workflow().spec, run_dir=tmp_path, context=context, sandbox="none") as runner:
        async for ev in runner.stream({"task": "what does 'stream' mean?"}, thread_id="s1",
                                      mode=["tokens", "tools", "nodes"], nodes=["code"]):
            seen.append((ev, time.monotonic()))
    events = [ev for ev, _ in seen]
    assert events[0].kind == "run.start" and events[0].data["thread_id"] == "s1"
    assert events[-1].kind == "run.end" and events[-1].result.status == "done"
    assert events[-1].result.state["code"]["done"] is True
    inside = events[1:-1]
    assert {ev.path for ev in inside} == {("solve", "code")}  # the nested node only: `solve`, `after` filtered out
    kinds = [ev.kind for ev in inside]
    assert kinds[0] == "node.start" and kinds[-1] == "node.end" and kinds.count("node.end") == 1
    call = inside[kinds.index("tool.call")]
    result = inside[kinds.index("tool.result")]
    assert call.data["tool"] == "lookup" and call.data["args"] == {"word": "stream"}
    assert result.data["ok"] is True and result.text == "stream: to flow"
    tokens = [(ev, at) for ev, at in seen if ev.kind == "token"]
    assert "".join(ev.text for ev, _ in tokens) == ANSWER
    assert kinds.index("tool.result") < kinds.index("token") < kinds.index("node.end")
    # live: the first token was in our hands before the server had sent the reply's last chunk
    assert tokens[0][1] < slow_server.sent[-1]
    assert isinstance(inside[-1].data["duration_s"], float)  # the nested node's own time, start to end


async def test_every_node_and_model_call_without_a_filter(tmp_path: Path, slow_server: SlowServer) -> None:
    from agentflow.models.spec import load_model

    context = RunHandles(chat_model=load_model(slow_server.spec))
    async with WorkflowRunner(_workflow().spec, run_dir=tmp_path, context=context, sandbox="none") as runner:
        with pytest.raises(UserError, match="unknown stream mode 'token'"):
            [ev async for ev in runner.stream({"task": "x"}, mode=["token"])]
        events = [ev async for ev in runner.stream({"task": "x"}, thread_id="s2", mode=["nodes", "models"])]
    starts = [ev.path for ev in events if ev.kind == "node.start"]
    assert starts == [("solve",), ("solve", "code"), ("after",)]
    calls = [ev for ev in events if ev.kind == "model.call"]
    assert [c.data["call"] for c in calls] == [1, 2] and calls[0].data["tool_calls"] == ["lookup"]
    assert calls[1].data["input_tokens"] == 50 and calls[1].data["output_tokens"] == 10
    assert not [ev for ev in events if ev.kind in ("token", "tool.call")]  # modes not asked for
    assert (tmp_path / "events.jsonl").is_file() and (tmp_path / "usage.json").is_file()
    assert json.loads((tmp_path / "usage.json").read_text())["model_calls"] == 2


async def test_leaving_the_stream_cancels_the_run_and_stream_resumes_it(tmp_path: Path, slow_server: SlowServer) -> None:
    import contextlib

    from agentflow.models.spec import load_model

    context = RunHandles(chat_model=load_model(slow_server.spec))
    async with WorkflowRunner(_workflow().spec, run_dir=tmp_path, context=context, sandbox="none") as runner:
        async with contextlib.aclosing(runner.stream({"task": "x"}, thread_id="s3", mode=["tokens"])) as events:
            async for ev in events:
                if ev.kind == "token":
                    break  # mid-reply: the run is cancelled here
        assert (await runner.result("s3")).next == ["solve"]
        resumed = [ev async for ev in runner.stream(thread_id="s3", resume=True, mode=["tokens", "tools"])]
    assert resumed[0].data["resumed"] is True and resumed[-1].result.status == "done"
    assert "".join(ev.text for ev in resumed if ev.kind == "token") == ANSWER
    # the tool call completed before the cut is replayed from the journal, the cut reply asked again
    (result,) = [ev for ev in resumed if ev.kind == "tool.result"]
    assert result.data["tool"] == "lookup" and slow_server.requests == 3


async def test_a_search_node_streams_its_branches(tmp_path: Path) -> None:
    from tests.graph.search_nodes import SearchState, attempt

    sub = Workflow("try", state=SearchState).node("attempt", attempt, writes=["answer", "score", "steps"])
    wf = Workflow("s", state=SearchState).search("go", sub.edge("attempt", END), strategy="best_of_n", n=3,
                                                  value="score", output="report")
    async with WorkflowRunner(wf.edge("go", END).spec, run_dir=tmp_path) as runner:
        events = [ev async for ev in runner.stream({"task": "x"}, mode=["search"])]
    branches = [ev for ev in events if ev.kind == "search.branch"]
    assert {ev.path for ev in branches} == {("go",)}
    ends = {ev.data["node_id"]: ev.data["value"] for ev in branches if ev.data["event"] == "end"}
    assert ends == {f"go/b{k}": (k * 37) % 10 for k in range(3)}
    assert events[-1].result.state["report"]["chosen"] == "b1"


async def test_what_a_search_branch_sends_is_streamed_with_its_branch_path(tmp_path: Path) -> None:
    """Inside search branches, an agent's tokens and model calls (the test model) and a node's `ctx.stream`
    chunks reach the run's stream with the branch's path, nested searches included; `nodes=[search node]`
    keeps them."""
    import subprocess

    from agentflow.graph import load_workflow
    from agentflow.graph.define.loader import spec_from_dict

    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    spec = load_workflow(str(Path(__file__).with_name("branch_fork.yaml")))
    async with WorkflowRunner(spec, run_dir=tmp_path / "a", sandbox="local", workspace=ws,
                              context=RunHandles(model="test")) as runner:
        events = [ev async for ev in runner.stream({"task": "x"}, mode=["tokens", "models"], nodes=["attempt"])]
    for kind in ("model.start", "token", "model.call"):
        got = sorted((ev.path, ev.data["branch"]) for ev in events if ev.kind == kind)
        assert got == [(("attempt", f"b{k}", "review"), f"attempt/b{k}") for k in range(3)], (kind, got)
    assert all(ev.text for ev in events if ev.kind == "token")

    nested = spec_from_dict({
        "name": "nested", "state": {"task": {"type": "str"}, "score": {"type": "int"}},
        "nodes": {"go": {"search": {"n": 2, "value": "score"}, "next": "END", "subgraph": {"name": "outer", "nodes": {
            "inner": {"search": {"n": 2, "value": "score"}, "next": "END", "subgraph": {"name": "in", "nodes": {
                "say": {"fn": "tests.graph.search_nodes:streamed", "next": "END"}}}}}}}}})
    async with WorkflowRunner(nested, run_dir=tmp_path / "b") as runner:
        events = [ev async for ev in runner.stream({"task": "x"}, mode=["custom"], thread_id="t")]
    chunks = sorted((ev.path, ev.data["branch"], ev.text) for ev in events if ev.kind == "custom")
    assert chunks == [(("go", f"b{i}", "inner", f"b{j}", "say"), f"go/b{i}/inner/b{j}",
                       f"from t~go~b{i}~inner~b{j}") for i in range(2) for j in range(2)], chunks
