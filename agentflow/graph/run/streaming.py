"""Live events of a running workflow, from any node, nested subgraphs included.

    async for ev in runner.stream({"task": "..."}, thread_id="t1", mode=["tokens", "tools"], nodes=["code"]):
        if ev.kind == "token":
            print(ev.text, end="", flush=True)
        elif ev.kind == "tool.call":
            print(f"\\n{'/'.join(ev.path)} calls {ev.data['tool']}")

Nodes put what happens inside them (tokens, model calls, tool calls, search branches) on LangGraph's `custom`
stream as `{"node", "event", "text", "data"}` (`send`); with LangGraph's `tasks` stream (node starts and ends)
`LiveEvents` turns them into `RunEvent`s whose `path` names the node from the root graph down. What a search
branch's nodes send carries the branch path: `path` `("attempt", "b3", "code")`, `data["branch"]` `"attempt/b3"`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from agentflow.agents.stream import TokenForwardingModel
from agentflow.errors import UserError
from agentflow.models.base import ChatModel, ChatRequest, ChatResponse, ModelWrapper

StreamMode = Literal["tokens", "models", "tools", "nodes", "search", "custom"]
STREAM_MODES: tuple[StreamMode, ...] = ("tokens", "models", "tools", "nodes", "search", "custom")

MODE_OF: dict[str, StreamMode] = {
    "token": "tokens", "model.start": "models", "model.progress": "models",
    "model.call": "models", "tool.call": "tools", "tool.result": "tools",
    "node.start": "nodes", "node.end": "nodes", "interrupt": "nodes", "search.branch": "search",
    "search.decision": "search", "custom": "custom",
}
"""Which mode each event kind belongs to (`run.start` and `run.end` come in every mode)."""

PROGRESS_EVERY_S = 20.0
"""While a model call runs, a `model.progress` event (seconds so far, tokens so far) this often: a small model
on a busy CPU can take minutes before its first token (reading the prompt), and a run that prints nothing
for minutes looks hung."""

RESULT_CHARS = 2000
"""Most characters of a tool result carried by a `tool.result` event (the events file has the rest)."""


@dataclass(frozen=True)
class RunEvent:
    """One live event of a run."""

    kind: str
    """`run.start` (first: the thread id), `node.start` / `node.end`, `token`, `model.start` /
    `model.progress` (every `PROGRESS_EVERY_S` while the call runs: `running_s`, `tokens`) / `model.call`,
    `tool.call` (the model asked) / `tool.result`, `search.branch`, `custom` (a node's `ctx.stream(chunk)`),
    `interrupt`, `run.end` (last: `result` is the RunResult)."""
    node: str | None = None
    """The node it happened in (its name in its own graph)."""
    path: tuple[str, ...] = ()
    """Graph nodes from the root graph down to `node` (a nested node: its subgraph nodes first)."""
    elapsed_s: float = 0.0
    """Seconds since the stream started."""
    text: str = ""
    """`token`: the new text; `tool.result`: the tool's output (capped); `custom`: a text chunk."""
    data: dict[str, Any] = field(default_factory=dict)
    """The rest: `tool`/`args` (tool.call), `ok`/`duration_s` (tool.result), `latency_s`/`input_tokens`/
    `output_tokens` (model.call), `duration_s`/`update`/`error` (node.end), `thread_id` (run.start)..."""
    result: Any = None
    """`run.end`: the run's `RunResult`."""

    @property
    def mode(self) -> str:
        """The stream mode this event belongs to (`run` for run.start/run.end)."""
        return MODE_OF.get(self.kind, "run")

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (`event`, `node` as the path joined by '/', `elapsed_s`, then the data)."""
        out: dict[str, Any] = {"event": self.kind, "node": "/".join(self.path) or self.node,
                               "elapsed_s": round(self.elapsed_s, 3)}
        if self.text:
            out["text"] = self.text
        return {**out, **self.data}


def stream_writer() -> Callable[[Any], None] | None:
    """The running graph's `custom` stream writer (None outside a running graph)."""
    from langgraph.config import get_stream_writer

    try:
        return get_stream_writer()
    except RuntimeError:
        return None


def send(node: str | None, kind: str, /, text: str = "", **data: Any) -> None:
    """Put a live event on the running graph's `custom` stream (nothing outside a running graph)."""
    if (writer := stream_writer()) is not None:
        writer({"node": node, "event": kind, "text": text, "data": data})


def check_modes(mode: str | Iterable[str] | None) -> frozenset[str]:
    """The modes asked for (None: all), a UserError naming an unknown one."""
    if mode is None:
        return frozenset(STREAM_MODES)
    modes = frozenset([mode] if isinstance(mode, str) else mode)
    unknown = sorted(modes - set(STREAM_MODES))
    if unknown:
        raise UserError(f"unknown stream mode {', '.join(map(repr, unknown))}",
                        hint=f"modes: {', '.join(STREAM_MODES)}")
    return modes


class LiveEvents:
    """Turns the runner's `StreamEvent`s (LangGraph's tasks / custom / updates modes) into `RunEvent`s, keeping
    those of `modes` about `nodes` (a node matches when it, or a subgraph node it runs in, is named)."""

    def __init__(self, modes: Collection[str] | None = None, nodes: Collection[str] | None = None) -> None:
        self.t0 = time.monotonic()
        self.modes = frozenset(modes) if modes is not None else frozenset(STREAM_MODES)
        self.nodes = frozenset(nodes) if nodes else None
        self._started: dict[str, float] = {}

    def event(self, kind: str, **fields: Any) -> RunEvent:
        return RunEvent(kind=kind, elapsed_s=time.monotonic() - self.t0, **fields)

    def __call__(self, ev: Any) -> list[RunEvent]:
        """The RunEvents one StreamEvent makes (after filtering)."""
        graph_path = tuple(part.split(":", 1)[0] for part in ev.namespace)
        out = self._tasks(ev.data, graph_path) if ev.mode == "tasks" else \
            self._custom(ev.data, graph_path) if ev.mode == "custom" else \
            self._interrupts(ev.data, graph_path) if ev.mode == "updates" else []
        return [e for e in out if self.keep(e)]

    def keep(self, event: RunEvent) -> bool:
        if event.mode != "run" and event.mode not in self.modes:
            return False
        return self.nodes is None or event.mode == "run" or bool(self.nodes & set(event.path))

    def _tasks(self, data: Any, graph_path: tuple[str, ...]) -> list[RunEvent]:
        if not isinstance(data, dict) or "name" not in data:
            return []
        name, task = str(data["name"]), str(data.get("id", ""))
        path = (*graph_path, name)
        if "input" in data:  # a task started
            self._started[task] = time.monotonic()
            return [self.event("node.start", node=name, path=path)]
        started = self._started.pop(task, None)
        error, result = data.get("error"), data.get("result")
        return [self.event("node.end", node=name, path=path, data={
            "duration_s": round(time.monotonic() - started, 3) if started is not None else None,
            "update": result if isinstance(result, dict) else {},
            "error": None if error is None else str(error),
            "interrupted": bool(data.get("interrupts")),
        })]

    def _custom(self, data: Any, graph_path: tuple[str, ...]) -> list[RunEvent]:
        if not isinstance(data, dict):
            return [self.event("custom", path=graph_path, data={"chunk": data})]
        node, kind, given = data.get("node"), data.get("event"), data.get("data")
        rest: dict[str, Any] = dict(given) if isinstance(given, dict) else {}
        if kind in ("search.branch", "search.decision"):  # a search node's branch: attributed to the search node
            node = rest.get("search") or node
        within = [str(part) for part in data.get("within") or ()]  # from inside a search branch: its path
        if within:
            rest["branch"] = "/".join(within)
            graph_path = (*graph_path, *within)
        path = (*graph_path, str(node)) if node else graph_path
        if kind is None:  # a node's own ctx.stream(chunk)
            chunk = data.get("chunk")
            text = chunk if isinstance(chunk, str) else ""
            tags = {"branch": rest["branch"]} if "branch" in rest else {}
            return [self.event("custom", node=node, path=path, text=text,
                               data=tags if text else {**tags, "chunk": chunk})]
        return [self.event(str(kind), node=node, path=path, text=str(data.get("text") or ""), data=dict(rest))]

    def _interrupts(self, data: Any, graph_path: tuple[str, ...]) -> list[RunEvent]:
        if not isinstance(data, dict) or "__interrupt__" not in data:
            return []
        values = [getattr(i, "value", None) for i in (data["__interrupt__"] or ())]
        node = next((v.get("node") for v in values if isinstance(v, dict) and v.get("node")), None)
        path = (*graph_path, str(node)) if node else graph_path
        return [self.event("interrupt", node=node, path=path, data={"value": values})]


class TokenStreamingModel(ModelWrapper):
    """A model whose tokens (`TokenForwardingModel`) go to the run's stream, attributed to `node`, with a
    `model.start` and a `model.call` event around each call and a `model.progress` event every
    `PROGRESS_EVERY_S` between them (outside a running graph the model is called as it is)."""

    def __init__(self, inner: ChatModel, node: str) -> None:
        super().__init__(inner)
        self.node = node

    async def chat(self, request: ChatRequest) -> ChatResponse:
        writer = stream_writer()
        if writer is None:  # called outside a running graph
            return await self.inner.chat(request)
        call = 1 + sum(1 for m in request.messages if m.role == "assistant")  # the agent's loop step
        send(self.node, "model.start", call=call, spec=self.spec, n=request.n)
        started = time.monotonic()
        tokens = [0]  # this call's own count: calls of one node's model may run at once (search branches)

        def forward(text: str) -> None:
            tokens[0] += 1
            writer({"node": self.node, "event": "token", "chunk": text, "text": text, "data": {}})

        ticker = asyncio.create_task(self._tick(call, started, tokens, writer))
        try:
            response = await TokenForwardingModel(self.inner, forward).chat(request)
        finally:
            ticker.cancel()
        usage = response.usage
        send(self.node, "model.call", call=call, spec=self.spec, latency_s=round(time.monotonic() - started, 3),
             input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
             tool_calls=[c.name for c in response.message.tool_calls] if response.choices else [],
             finish_reason=response.choices[0].finish_reason if response.choices else "unknown")
        return response

    async def _tick(self, call: int, started: float, tokens: list[int], writer: Callable[[Any], None]) -> None:
        """A `model.progress` event every PROGRESS_EVERY_S until cancelled (the call has returned)."""
        while True:
            await asyncio.sleep(PROGRESS_EVERY_S)
            writer({"node": self.node, "event": "model.progress", "text": "", "data": {
                "call": call, "running_s": round(time.monotonic() - started, 1), "tokens": tokens[0]}})


__all__ = ["MODE_OF", "PROGRESS_EVERY_S", "STREAM_MODES", "LiveEvents", "RunEvent", "StreamMode", "TokenStreamingModel",
           "check_modes", "send", "stream_writer"]
