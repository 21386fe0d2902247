"""Events -> OpenTelemetry spans, following the GenAI semantic conventions.

One source: the spans are derived from the events a run writes (`EventLog` sinks see every event right after
it is written), never recorded beside them. A `SpanTranslator` works live (a sink of the run's log) and on an
events file afterwards (`replay`), with the events' own timestamps, so both give the same spans.

Nesting. Start/end pairs (`run`, graph `node`, `agent`, `repair`, a search's `search.branch`) open and close
spans; a search's tree is a span per `search.node` under a `search <strategy>` span. A point event that
carries a duration (`model.call`, `tool.call`, `sandbox.exec`, `repair.attempt`) becomes a span that ends at
the event's time. Its parent is found from the event itself (an open agent / graph node / repair of the same
`node_id`, the node its search branch is running, the repair of its `instance_id`), so a replay nests these
exactly as the live run did. Only an event that names nothing (a workflow's `sandbox.exec`) is placed by the
scope current in the emitting task: live, the translator notes it in a context variable that each asyncio task
and thread sees on its own, so concurrent branches nest as they ran; replayed, the last one opened. Other
events become span events on their parent.

Cost. A sink call only notes the event and its task's scope; the spans are made in batches (256 events, or a
second after the last batch, and at `close()`), where the SDK's code runs faster than interleaved with the run's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from agentflow.events import Event
from agentflow.events.kinds import (
    AgentEnd,
    AgentStart,
    BranchMoment,
    ModelCall,
    NodeEnd,
    NodeStart,
    RepairAttempt,
    RepairBase,
    RepairEnd,
    RepairMutants,
    RepairPlan,
    RepairRank,
    RepairReproduce,
    RepairStart,
    RunEnd,
    RunResume,
    RunStart,
    SandboxExec,
    SearchBranch,
    SearchNode,
    ToolCalled,
)

_TEXT_CAP = 4000  # characters of one attribute value (a patch, a command, a message list)
_ROOT = Context()  # explicit parents only: a batch is made in whichever task wrote its last event
_BATCH = 256  # events translated together: the SDK's span code runs cache-hot
_BATCH_S = 1.0  # ... or after this long since the last batch, so a slow run's spans are not held back
# the events that open / close a scope in the emitting task, and the key of the span they open / close
_OPENS: dict[type[Event], str] = {RunStart: "run", RunResume: "run", NodeStart: "node", AgentStart: "agent",
                                  RepairStart: "repair"}
_CLOSES: dict[type[Event], str] = {RunEnd: "run", NodeEnd: "node", AgentEnd: "agent", RepairEnd: "repair"}
_SCALARS = (str, bool, int, float)


def _branch_of(event: Event) -> str | None:
    """`search/branch` of an event a search branch wrote (its nodes, agents, calls), else None: the id of its
    `search.branch` events, so with the task's id in front when the task's events name their nodes so (a
    repair's)."""
    if not event.branch:
        return None
    iid = event.instance_id or ""
    prefix = f"{iid}/" if iid and (event.node_id or "").startswith(f"{iid}/") else ""
    return f"{prefix}{event.search}/{event.branch}"


def _scoped(event: Event, name: str) -> str:
    """A node or agent span's key: its name, prefixed by its search branch (branches run the same nodes)."""
    branch = _branch_of(event)
    return f"{branch}/{name}" if branch else name


@dataclass(eq=False)
class _Open:
    span: Span
    parent: _Open | None
    key: tuple[str, str]
    last_ns: int
    children: dict[int, _Open] = field(default_factory=dict)  # the open ones (an ended span is let go)
    tokens: list[int] = field(default_factory=lambda: [0, 0])  # input, output of the model calls inside
    step_ns: int = 0  # where a repair's next step span starts (its previous step's end)


@dataclass(slots=True, eq=False)
class _Scope:
    """What was current in the emitting task when an event was written (its span is made later, in a batch)."""

    key: tuple[str, str]
    parent: _Scope | None
    record: _Open | None = None  # set when its start event is translated


def _scope_key(kind: str, event: Event) -> tuple[str, str]:
    if kind == "run":
        return (kind, "")
    name = event.node_id or ""
    return (kind, _scoped(event, name) if kind in ("node", "agent") else name)


def _ns(ts: float) -> int:
    return int(ts * 1_000_000_000)


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= _TEXT_CAP else text[:_TEXT_CAP] + "...[truncated]"


def _flat(prefix: str, data: dict[str, Any], skip: Iterable[str] = ()) -> dict[str, Any]:
    """Scalar fields as `prefix.key` attributes; lists of strings joined; anything else as (capped) JSON text."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if value is None or key in skip:
            continue
        name = f"{prefix}.{key}"
        if isinstance(value, _SCALARS):
            out[name] = _text(value) if isinstance(value, str) else value
        elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            out[name] = _text(", ".join(value))  # one string: the SDK checks a list's items one by one, slowly
        else:
            out[name] = _text(value)
    return out


def provider_name(spec: str) -> str:
    """`gen_ai.provider.name` from a model spec: `openai:gpt-4o` -> openai, `local:qwen` -> llama.cpp."""
    prefix = spec.split(":", 1)[0] if ":" in spec else spec
    return {"local": "llama.cpp", "llamacpp": "llama.cpp", "compat": "openai_compatible"}.get(prefix, prefix)


def request_model(spec: str) -> str:
    return spec.split(":", 1)[1] if ":" in spec else spec


class SpanTranslator:
    """An `EventLog` sink turning events into spans on `tracer`; `close()` ends what is still open.

    `capture_content` adds message contents and tool arguments/results (opt-in, as the conventions ask).
    Called under the log's lock, so it needs none of its own."""

    def __init__(self, tracer: Tracer, *, capture_content: bool = False, on_close: Any = None) -> None:
        self.tracer = tracer
        self.capture_content = capture_content
        self.on_close = on_close
        self._open: dict[tuple[str, str], _Open] = {}
        self._scope: ContextVar[_Scope | None] = ContextVar(f"agentflow_scope_{id(self)}", default=None)
        self._pending: list[tuple[Event, _Scope | None, _Scope | None]] = []
        self._drained_at = time.monotonic()
        self._ctx: _Scope | None = None  # the emitting task's scope of the event being translated
        self._new: _Scope | None = None  # the scope that event opened
        self._last_ns = 0
        self._handlers: dict[type[Event], Callable[[Any], None]] = {
            RunStart: self._run_start, RunResume: self._run_start, RunEnd: self._run_end,
            NodeStart: self._node_start, NodeEnd: self._node_end,
            AgentStart: self._agent_start, AgentEnd: self._agent_end,
            RepairStart: self._repair_start, RepairEnd: self._repair_end,
            SearchNode: self._search_node, SearchBranch: self._branch,
            ModelCall: self._model_call, ToolCalled: self._tool_call, SandboxExec: self._sandbox_exec,
            RepairAttempt: self._attempt,
            RepairRank: self._repair_step, RepairBase: self._repair_step,
            RepairReproduce: self._repair_step, RepairPlan: self._repair_step, RepairMutants: self._repair_step,
        }
        """What each kind of event makes (any other: a span event on its parent span)."""

    # ------------------------------------------------------------------------------------------- plumbing

    def __call__(self, event: Event) -> None:
        """Note the emitting task's scope now (cheap); translate in batches."""
        scope = self._scope.get()
        opened = None
        opens, closes = _OPENS.get(type(event)), _CLOSES.get(type(event))
        if opens is not None:
            opened = _Scope(_scope_key(opens, event), scope)
            self._scope.set(opened)
        elif closes is not None and scope is not None and scope.key == _scope_key(closes, event):
            self._scope.set(scope.parent)
        self._pending.append((event, scope, opened))
        if len(self._pending) >= _BATCH or time.monotonic() - self._drained_at >= _BATCH_S:
            self.flush()

    def flush(self) -> None:
        """Translate the events noted so far."""
        pending, self._pending = self._pending, []
        for event, scope, opened in pending:
            self._ctx, self._new = scope, opened
            self._last_ns = max(self._last_ns, _ns(event.ts))
            self._handlers.get(type(event), self._point)(event)
        self._ctx = self._new = None
        self._drained_at = time.monotonic()

    def close(self) -> None:
        """End every span still open (a crashed or interrupted run) at the last event's time."""
        self.flush()
        for record in reversed(list(self._open.values())):
            self._end(record, self._last_ns)
        if self.on_close is not None:
            self.on_close()

    def _start(self, key: tuple[str, str], name: str, parent: _Open | None, start_ns: int,
               attributes: dict[str, Any], kind: SpanKind = SpanKind.INTERNAL, *, current: bool = True) -> _Open:
        context = trace.set_span_in_context(parent.span, _ROOT) if parent is not None else _ROOT
        span = self.tracer.start_span(name, context=context, kind=kind, attributes=attributes, start_time=start_ns)
        record = _Open(span, parent, key, start_ns, step_ns=start_ns)
        if parent is not None:
            parent.children[id(record)] = record
        self._open[key] = record
        if current and self._new is not None and self._new.key == key:
            self._new.record = record
        return record

    def _end(self, record: _Open, end_ns: int, attributes: dict[str, Any] | None = None,
             error: Any = None) -> None:
        """End `record`'s span (with its last `attributes`; an `error` sets its status)."""
        if attributes:
            record.span.set_attributes(attributes)
        if error:
            record.span.set_status(Status(StatusCode.ERROR, str(error)[:500]))
        if self._open.get(record.key) is record:
            del self._open[record.key]
        if record.parent is not None:
            record.parent.children.pop(id(record), None)
        record.span.end(end_time=max(end_ns, record.last_ns))

    def _leaf(self, name: str, parent: _Open | None, event: Event, duration_s: float | None,
              attributes: dict[str, Any], kind: SpanKind = SpanKind.INTERNAL, error: str | None = None,
              start_ns: int | None = None) -> None:
        """A span that ended at the event's time and lasted `duration_s` (or began at `start_ns`)."""
        end = _ns(event.ts)
        start = start_ns if start_ns is not None else end - int(max(duration_s or 0.0, 0.0) * 1_000_000_000)
        if parent is not None:
            parent.last_ns = max(parent.last_ns, end)
        context = trace.set_span_in_context(parent.span, _ROOT) if parent is not None else _ROOT
        span = self.tracer.start_span(name, context=context, kind=kind, attributes=attributes, start_time=start)
        if error:
            span.set_status(Status(StatusCode.ERROR, error[:500]))
        span.end(end_time=end)

    def _live(self, record: _Open | None) -> _Open | None:
        return record if record is not None and self._open.get(record.key) is record else None

    def _cur(self) -> _Open | None:
        """The innermost still-open span of the emitting task's scope."""
        scope = self._ctx
        while scope is not None:
            found = self._live(scope.record)
            if found is not None:
                return found
            scope = scope.parent
        return None

    def _parent(self, event: Event) -> _Open | None:
        """The span an event belongs to: its agent / node / repair, the node its search branch is running, the
        current one, the run."""
        if event.node_id is not None:
            for scope in ("agent", "node", "repair", "snode"):
                found = self._open.get((scope, _scoped(event, event.node_id) if scope in ("agent", "node")
                                        else event.node_id))
                if found is not None:
                    return found
        branch = _branch_of(event)
        if branch is not None:  # a graph search branch's own event (a repair's attempt): the branch's node
            found = self._in_branch(branch)
            if found is not None:
                return found
        current = self._cur()
        repair = self._open.get(("repair", event.instance_id or ""))
        if repair is not None:  # the task's current span if it is inside this repair (live), else the repair
            span = current
            while span is not None and span is not repair:
                span = span.parent
            return current if span is repair else repair
        return current or self._open.get(("run", ""))

    def _in_branch(self, branch: str) -> _Open | None:
        """The node a graph search branch is running (the last it started), else the branch's span."""
        record = self._open.get(("branch", branch))
        if record is None:
            return None
        nodes = [child for child in record.children.values() if child.key[0] == "node"]
        return nodes[-1] if nodes else record

    def _snode(self, node_id: str, parent_id: str | None, iid: str, start_ns: int) -> _Open:
        """The span of a search node, opened by its first event (or by a child's, should that come first)."""
        record = self._open.get(("snode", node_id))
        if record is None:
            parent = self._snode(parent_id, None, iid, start_ns) if parent_id else self._search_span(iid, start_ns)
            record = self._start(("snode", node_id), f"search.node {node_id}", parent, start_ns,
                                 {"agentflow.search.node_id": node_id}, current=False)
        return record

    def _point(self, event: Event) -> None:
        """Any other event: a span event on its parent span (budget.exceeded, repair.resample, ...)."""
        parent = self._parent(event)
        if parent is not None:
            parent.span.add_event(event.kind, _flat("agentflow", event.data), timestamp=_ns(event.ts))

    # ------------------------------------------------------------------------------------- start/end pairs

    def _run_start(self, event: RunStart | RunResume) -> None:
        name = f"workflow {event.workflow}" if event.workflow else "agentflow run"
        attrs = {"agentflow.run_id": event.run_id, **_flat("agentflow.run", event.data, skip=("instance_id",))}
        # a task's own workflow run (the repair graph of one instance) sits in that task's repair span
        iid = event.instance_id or ""
        parent = self._open.get(("repair", iid)) if iid else None
        self._start(("run", iid), name, parent, _ns(event.ts), attrs)  # else a root

    def _run_end(self, event: RunEnd) -> None:
        record = self._open.get(("run", event.instance_id or ""))
        if record is None:
            return
        record.span.set_attributes(_flat("agentflow.run", event.data))
        if event.status in ("error", "failed"):
            record.span.set_status(Status(StatusCode.ERROR, event.status))
        self._end_tree(record, _ns(event.ts))  # a node paused at an interrupt ends with its run

    def _node_start(self, event: NodeStart) -> None:
        name = event.node_id or "?"
        iid = event.instance_id or ""
        branch = _branch_of(event)
        if branch is not None:  # a search branch's node: under the branch, keyed apart from other branches'
            parent = self._open.get(("branch", branch)) or self._open.get(("node", branch.rsplit("/", 1)[0]))
        else:
            parent = self._open.get(("run", iid)) or self._cur()  # graph nodes are the run's
        attrs = {"agentflow.node": name, **({"agentflow.search.branch": branch} if branch else {})}
        self._start(("node", _scoped(event, name)), f"node {name}", parent, _ns(event.ts), attrs)

    def _branch(self, event: SearchBranch) -> None:
        """A search branch's step (`search.branch` start / resume ... end): a span under its search node."""
        key = ("branch", event.node_id or "?")
        if event.event in (BranchMoment.START, BranchMoment.RESUME):
            search = (event.node_id or "").rsplit("/", 1)[0]  # the search node's id (`<search>/<branch>`)
            parent = self._open.get(("node", search)) or self._cur()
            self._start(key, f"branch {event.node_id}", parent, _ns(event.ts),
                        {"agentflow.search.branch": event.node_id or "?",
                         "agentflow.search.parent": event.parent or ""})
            return
        record = self._open.get(key)
        if record is not None:
            attrs = _flat("agentflow.search.branch", event.data, skip=("event", "search"))
            self._end(record, _ns(event.ts), attrs, event.error)

    def _node_end(self, event: NodeEnd) -> None:
        record = self._open.get(("node", _scoped(event, event.node_id or "?")))
        if record is not None:
            if event.writes:
                record.span.set_attribute("agentflow.node.writes", ", ".join(event.writes))
            self._end(record, _ns(event.ts))

    def _agent_start(self, event: Event) -> None:
        name = event.node_id or "agent"
        key = _scoped(event, name)
        parent = self._open.get(("node", key)) or self._cur() or self._open.get(("run", ""))
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name,
                 **_flat("agentflow.agent", event.data)}
        self._start(("agent", key), f"invoke_agent {name}", parent, _ns(event.ts), attrs)

    def _agent_end(self, event: Event) -> None:
        record = self._open.get(("agent", _scoped(event, event.node_id or "agent")))
        if record is None:
            return
        d = event.data
        attrs = {
            "gen_ai.usage.input_tokens": record.tokens[0],
            "gen_ai.usage.output_tokens": record.tokens[1],
            **_flat("agentflow.agent", d, skip=("usage",)),
            **_flat("agentflow.agent.usage", d.get("usage") or {}),
        }
        error = d.get("error") or ("error" if d.get("stop_reason") == "error" else None)
        self._end(record, _ns(event.ts), attrs, error)

    def _repair_start(self, event: Event) -> None:
        iid = event.node_id or ""
        parent = self._cur() or self._open.get(("run", ""))
        attrs = {"agentflow.instance_id": iid, **_flat("agentflow.repair", event.data, skip=("instance_id",))}
        self._start(("repair", iid), f"repair {iid}", parent, _ns(event.ts), attrs)

    def _repair_end(self, event: Event) -> None:
        record = self._open.get(("repair", event.node_id or ""))
        if record is None:
            return
        for child in list(record.children.values()):  # a search the repair left open
            self._end_tree(child, _ns(event.ts))
        attrs = _flat("agentflow.repair", event.data, skip=("instance_id",))
        self._end(record, _ns(event.ts), attrs, event.data.get("error"))

    def _repair_step(self, event: Event) -> None:
        """rank / base / reproduce / plan: a step from the repair's previous step to this event."""
        record = self._open.get(("repair", event.node_id or ""))
        if record is None:
            return self._point(event)
        attrs = _flat("agentflow", event.data, skip=("instance_id",))
        self._leaf(event.kind, record, event, None, attrs, start_ns=record.step_ns)
        record.step_ns = _ns(event.ts)
        return None

    def _search_span(self, iid: str, start_ns: int) -> _Open:
        """The search span of an instance, opened by its tree's root node."""
        record = self._open.get(("search", iid))
        if record is None:
            parent = self._open.get(("repair", iid)) or self._cur() or self._open.get(("run", ""))
            # not made current: the search's own tasks find their nodes by id; the repair's later steps stay its own
            record = self._start(("search", iid), "search", parent, start_ns, {}, current=False)
        return record

    def _end_tree(self, record: _Open, end_ns: int) -> int:
        """End a search and its nodes; each node ends at its last update, or its subtree's when later (a graph
        search writes its tree's final records root first). Returns when `record` ended."""
        ends = [self._end_tree(child, child.last_ns if child.key[0] == "snode" else end_ns)
                for child in list(record.children.values())]
        end = max([end_ns, record.last_ns, *ends])
        self._end(record, end)
        return end

    def _search_node(self, event: Event) -> None:
        """A node of a search's tree (a branch, or the root: the state the search started from); its spans
        nest as the tree, the last update's value, visits and whether it finished on each."""
        node_id = event.node_id or ""
        d = event.data
        attrs = {
            "agentflow.search.node_id": node_id,
            **_flat("agentflow.search", {k: d.get(k) for k in ("value", "visits", "depth", "terminal", "action",
                                                                 "strategy", "error", "chosen")}),
        }
        record = self._snode(node_id, event.parent_id, event.instance_id or "", _ns(event.ts))
        record.span.set_attributes(attrs)
        record.last_ns = max(record.last_ns, _ns(event.ts))
        if event.parent_id is None and record.parent is not None and record.parent.key[0] == "search":
            record.parent.span.update_name(f"search {d.get('strategy') or ''}".strip())

    # ------------------------------------------------------------------------------------------ leaf spans

    def _model_call(self, event: Event) -> None:
        d = event.data
        spec = str(d.get("spec") or "")
        usage = d.get("usage") or {}
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name(spec),
            "gen_ai.system": provider_name(spec),
            "gen_ai.request.model": request_model(spec),
            "gen_ai.response.model": str(d.get("model") or request_model(spec)),
            "gen_ai.usage.input_tokens": int(usage.get("input_tokens") or 0),
            "gen_ai.usage.output_tokens": int(usage.get("output_tokens") or 0),
            "gen_ai.response.finish_reasons": [str(r) for r in d.get("finish_reasons") or []],
            "gen_ai.request.choice.count": int(d.get("n") or 1),
            "agentflow.model.cached": bool(d.get("cached")),
        }
        if usage.get("cost_usd") is not None:
            attrs["agentflow.model.cost_usd"] = float(usage["cost_usd"])
        if self.capture_content and "messages" in d:
            attrs["gen_ai.input.messages"] = _text(d["messages"])
            attrs["gen_ai.output.messages"] = _text(d.get("output") or [])
        name = f"chat {attrs['gen_ai.request.model']}"
        parent = self._parent(event)
        if parent is not None and parent.key[0] == "agent":
            parent.tokens[0] += attrs["gen_ai.usage.input_tokens"]
            parent.tokens[1] += attrs["gen_ai.usage.output_tokens"]
        self._leaf(name, parent, event, d.get("latency_s"), attrs, SpanKind.CLIENT)

    def _tool_call(self, event: Event) -> None:
        d = event.data
        name = str(d.get("name") or "?")
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": str(d.get("call_id") or ""),
            "agentflow.tool.replayed": bool(d.get("replayed")),
        }
        if not d.get("ok", True):
            attrs["error.type"] = str(d.get("error") or "tool_error")
        if self.capture_content:
            attrs["gen_ai.tool.call.arguments"] = _text(d.get("args") or {})
            attrs["gen_ai.tool.call.result"] = _text(d.get("text") or "")
        error = None if d.get("ok", True) else str(d.get("error") or "tool error")
        self._leaf(f"execute_tool {name}", self._parent(event), event, d.get("duration_s"), attrs, error=error)

    def _sandbox_exec(self, event: Event) -> None:
        d = event.data
        attrs = _flat("agentflow.sandbox", d, skip=("exit_code",))
        if d.get("exit_code") is not None:
            attrs["process.exit.code"] = int(d["exit_code"])
        error = "timed out" if d.get("timed_out") else None
        self._leaf("sandbox.exec", self._parent(event), event, d.get("duration_s"), attrs, error=error)

    def _attempt(self, event: Event) -> None:
        """A candidate applied and verified: in the node that verified it (a search branch's test node)."""
        d = event.data
        attrs = {"agentflow.candidate_id": event.node_id or "",
                 **_flat("agentflow.attempt", d, skip=("instance_id", "duration_s"))}
        self._leaf(f"apply {event.node_id}", self._parent(event), event, d.get("duration_s"), attrs)


def replay(events: Iterable[Event], translator: SpanTranslator) -> None:
    """Feed a finished run's events to `translator` and close it (the spans a live run would have sent)."""
    for event in events:
        translator(event)
    translator.close()
