"""What a node can reach while it runs: run-scoped handles (`RunHandles[Deps]`) and the per-call `NodeContext[Deps]`.

A function node that declares a second parameter gets a `NodeContext`: `await ctx.call_tool("name", {...})`
runs a tool through the exactly-once journal, so a node re-run after a crash replays completed tool calls.
`ctx.deps` is the run's dependencies (`WorkflowRunner(spec, deps=...)`), typed by `NodeContext[MyDeps]`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic

from agentflow.errors import UserError
from agentflow.events.kinds import NodeStart, SearchBranch, SearchDecision
from agentflow.graph.run.superstep import Supersteps
from agentflow.tools.context import DepsT

if TYPE_CHECKING:
    from pathlib import Path

    from langgraph.checkpoint.base import BaseCheckpointSaver

    from agentflow.budget import Budget
    from agentflow.events import Event, EventLog
    from agentflow.executors.base import Executor
    from agentflow.executors.types import ExecutorConfig
    from agentflow.graph.define.spec import NodeSpec
    from agentflow.graph.search.workspace import BranchSandbox
    from agentflow.mcp.hub import McpHub
    from agentflow.models.base import ChatModel
    from agentflow.sandbox.base import Sandbox
    from agentflow.tools.decorator import Tool
    from agentflow.tools.journal import ToolJournal
    from agentflow.tools.result import ToolResult


LIVE_KINDS = (SearchBranch, SearchDecision)
"""Event kinds `RunHandles.emit` also puts on the run's live stream (`agentflow.graph.run.streaming`)."""


class NodeClock:
    """Wall time during which at least one typed node ran (nodes that run at once count once)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._running = 0
        self._since = 0.0

    def start(self) -> None:
        if self._running == 0:
            self._since = time.perf_counter()
        self._running += 1

    def stop(self) -> None:
        self._running -= 1
        if self._running == 0:
            self.seconds += time.perf_counter() - self._since


@dataclass
class RunHandles(Generic[DepsT]):
    """Handles shared by every node of one run (none of them required), generic in the run's deps."""

    events: EventLog | None = None
    journal: ToolJournal | None = None
    budget: Budget | None = None
    tools: dict[str, Tool | Callable[..., Any]] = field(default_factory=dict)
    """Tool name -> agentflow.tools.Tool (or a plain callable) available to `ctx.call_tool` and tool nodes."""
    model: str | None = None
    """Model spec for agent nodes (from --model, else the workflow's `model:`)."""
    chat_model: ChatModel | None = None
    """An already built model shared by agent nodes (tests pass a replay model here)."""
    sandbox: Sandbox | None = None
    """The sandbox tool calls and typed nodes act on (a search branch's: its fork)."""
    node_types: Any = None
    """The `NodeTypeRegistry` typed nodes come from (default: `default_registry()`; not annotated: no cycle)."""
    node_clock: NodeClock = field(default_factory=NodeClock)
    """Time spent inside typed nodes so far (shared with a search's branches; the rest of a run's wall time is
    the engine's own)."""
    mcp: McpHub | None = None
    """The run's MCP servers (from the workflow's `mcp_servers:`): their tools join `tools` on first use."""
    checkpointer: BaseCheckpointSaver[Any] | None = None
    """The run's checkpointer (set by `WorkflowRunner`): a search node keeps each branch's checkpoints there."""
    branch: str | None = None
    """Inside a search branch: its thread id (`<run thread>~<search node>~<branch id>...`); None on the main line."""
    sample: int | None = None
    """Inside a search branch: which child of its parent it is (0: the first), so sampling nodes seed siblings
    apart (`agentflow.reasoning.llm.sampling`)."""
    siblings: int | None = None
    """Inside a search branch: how many children its parent is given (best_of_n: `n`; beam, tot, mcts: `expand`
    at its depth; None in rebase, which shares them out by value), so a node that splits one job among siblings
    (`instruct.refine`) knows the last."""
    branch_workspaces: dict[str, BranchSandbox] = field(default_factory=dict)
    """Branch thread -> its `BranchSandbox` while a search runs: the runner records its checkpoints' workspace."""
    run_dir: Path | None = None
    """The run's folder when it has one (the workspace diffs recorded at checkpoints live there)."""
    models: dict[str, ChatModel] = field(default_factory=dict)
    """Models built from spec strings during the run, one per spec (search branches included)."""
    deps: DepsT = None  # type: ignore[assignment]  # None when a run is given none (DepsT then defaults to Any)
    """The application's dependencies: `ctx.deps` in function and typed nodes, `ToolContext.deps` in tools."""
    supersteps: Supersteps = field(default_factory=Supersteps)
    """The steps whose async nodes are running: a node that fails waits for its siblings there (`superstep.py`)."""
    executor: Executor | ExecutorConfig | None = None
    """Where search steps run when a search node does not say: an open `Executor` or an `ExecutorConfig`."""

    def model_for(self, spec: str) -> ChatModel:
        """The run's model for `spec`, built on first use."""
        found = self.models.get(spec)
        if found is None:
            from agentflow.models.spec import load_model

            found = self.models[spec] = load_model(spec)
        return found

    after_tool_call: Callable[[], Awaitable[None]] | None = None
    """Awaited after each tool call of an agent or function node."""

    def start_node(self, name: str, node_type: str | None = None, strategy: str | None = None) -> None:
        """A node begins (`node.start`); past the run's wall-clock limit it raises `BudgetExceeded` instead, so a
        resume begins with it (a search's branches are left to their search)."""
        if self.budget is not None and self.branch is None:
            self.budget.check_wall()
        self.emit(NodeStart(node_id=name, type=node_type, strategy=strategy))

    def emit(self, event: Event) -> None:
        """Record `event` in the run's log; a search's branch events also go on the run's live stream."""
        if self.events is not None:
            self.events.write(event)
        if isinstance(event, LIVE_KINDS):  # also streamed live (a search node's branches)
            from agentflow.graph.run.streaming import send

            send(event.node_id, event.kind, node_id=event.node_id, **event.data)


class NodeContext(Generic[DepsT]):
    """Passed to a node as its second argument."""

    __slots__ = ("_calls", "config", "node", "run", "spec")

    def __init__(self, run: RunHandles[DepsT], node: str, config: Mapping[str, Any],
                 spec: NodeSpec | None = None) -> None:
        self.run = run
        self.node = node
        self.config = config
        self.spec = spec
        """The node's `NodeSpec` (typed nodes: a search node reads its `subgraph` here)."""
        self._calls = 0

    @property
    def deps(self) -> DepsT:
        """The run's dependencies (`WorkflowRunner(spec, deps=...)`; None when none were given)."""
        return self.run.deps

    @property
    def thread_id(self) -> str:
        return str((self.config.get("configurable") or {}).get("thread_id", ""))

    @property
    def step(self) -> int:
        return int((self.config.get("metadata") or {}).get("langgraph_step", 0))

    def emit(self, event: Event) -> None:
        """Record an event attributed to this node (its `node_id`, unless the event names one)."""
        self.run.emit(event if event.node_id else event.model_copy(update={"node_id": self.node}))

    def stream(self, chunk: Any) -> None:
        """Send a chunk (e.g. model tokens) to the run's `custom` stream."""
        from langgraph.config import get_stream_writer

        get_stream_writer()({"node": self.node, "chunk": chunk})

    async def call_tool(self, tool: str | Callable[..., Any], args: dict[str, Any] | None = None) -> ToolResult:
        """Run a tool once per (thread, node, step, call index): a replayed node gets the journaled result."""
        from agentflow.graph.run.streaming import RESULT_CHARS, send
        from agentflow.models.base import ToolCall
        from agentflow.tools.context import ToolContext
        from agentflow.tools.decorator import Tool
        from agentflow.tools.journal import journal_key
        from agentflow.tools.registry import ToolRegistry

        args = dict(args or {})
        if isinstance(tool, str):  # the run's tool, else the MCP tool of that name (starting its server)
            obj = self.run.tools.get(tool) or (await self.run.mcp.find(tool) if self.run.mcp else None)
            if obj is None:
                known = [*self.run.tools, *[t.name for t in (await self.run.mcp.tools() if self.run.mcp else [])]]
                raise UserError(f"node '{self.node}' calls unknown tool '{tool}'",
                                hint=f"known tools: {', '.join(sorted(known)) or '(none; add tools: to the workflow)'}")
        else:
            obj = tool
        if not isinstance(obj, Tool):
            obj = Tool(obj)
        index = self._calls
        self._calls += 1
        key = journal_key(self.thread_id, self.node, self.step, index, obj.name, args)
        ctx: ToolContext[Any] = ToolContext(sandbox=self.run.sandbox, budget=self.run.budget,
                                            events=self.run.events, deps=self.run.deps)
        call = ToolCall(id=f"{self.node}-{self.step}-{index}", name=obj.name, arguments=args)
        # The registry owns validation, timeout, budget, the `tool.call` event and the journal replay.
        send(self.node, "tool.call", tool=obj.name, args=args)
        result = await ToolRegistry([obj]).execute(call, ctx, journal=self.run.journal, key=key, node_id=self.node)
        send(self.node, "tool.result", result.text[:RESULT_CHARS], tool=obj.name, ok=result.ok,
             duration_s=round(result.duration_s, 3), replayed=result.replayed)
        if self.run.after_tool_call is not None and not result.replayed:
            await self.run.after_tool_call()
        return result
