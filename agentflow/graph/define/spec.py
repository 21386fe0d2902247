"""WorkflowSpec: the single definition of a workflow that both the YAML loader and the Python builder produce.

A spec is data (nodes, edges, routes, parallel groups, state fields); it neither runs nor stores anything.
`agentflow.graph.check.validation` checks it, `agentflow.graph.compile` turns it into a LangGraph StateGraph.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from agentflow.config import StrictConfig
from agentflow.mcp.config import McpServerConfig

START = "__start__"
END = "END"
"""Name of the end of a workflow in edges and route cases (`__end__` and `end` are accepted too)."""

END_ALIASES = {"END", "__end__", "end"}

Reducer = Literal["append", "add", "merge", "replace"]


class FieldSpec(StrictConfig):
    """One key of the workflow state."""

    type: str = "any"
    """Value type: str, int, float, bool, list, dict or any."""
    reducer: Reducer | None = None
    """How concurrent or repeated writes combine: append/add (lists, numbers), merge (dicts); None replaces."""
    default: Any = None
    """Initial value when the input does not set the key."""


class NodeSpec(StrictConfig):
    """One node: exactly one of fn, agent, tool, interrupt, subgraph or type says what it does. A node with
    `search:` settings runs its `subgraph:` as the branches of a search (see `agentflow.graph.search`)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, arbitrary_types_allowed=True)

    fn: Any = None
    """A callable or an import path `pkg.mod:func`; called with (state) or (state, ctx), returns updates."""
    agent: str | None = None
    """A role from agentflow.agents (planner, coder, critic, verifier); resolved when the node is compiled."""
    tool: str | None = None
    """A tool name from the workflow's tool packs; called with `args` (state keys in `{key}` are filled in)."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Arguments for a tool node, or options for an agent node."""
    interrupt: str | None = None
    """Pause here for human approval with this message; resume with approve or edit."""
    show: list[str] = Field(default_factory=list)
    """State keys shown to the human at an interrupt."""
    subgraph: Any = None
    """A nested WorkflowSpec (or a path to a YAML workflow) run as one node; for a search node, its branches."""
    type: str | None = None
    """A registered node type (`swe.edit`, `reason.value`; see `agentflow graph types`)."""
    settings: dict[str, Any] = Field(default_factory=dict)
    """Settings of a typed node, validated against its type's settings model."""
    writes: list[str] | None = None
    """State keys this node writes (checked for parallel conflicts); inferred from the return annotation if unset."""
    output: str | None = None
    """State key an agent or tool node writes its result to (defaults to the node name)."""
    on_error: str | None = None
    """Node (or END) to go to when this agent node fails; without it a failure ends the run `failed`."""
    search: Any = None
    """Search over this node's `subgraph:`: a mapping of `SearchSettings` (strategy best_of_n, beam, rebase or
    mcts; how many branches; the state path that values a branch; how the result is chosen). Each branch is
    a run of the subgraph with its own checkpoints and its own fork of the run's sandbox workspace."""

    def kind(self) -> str:
        if self.search is not None:
            return "search"
        for name in ("type", "fn", "agent", "tool", "interrupt", "subgraph"):
            if getattr(self, name) is not None:
                return name
        return "none"


class RouteSpec(StrictConfig):
    """Conditional edges out of `source`: pick the next node from a state field or a callable."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, arbitrary_types_allowed=True)

    source: str
    """Node the route leaves from."""
    on: Any = None
    """A state field name, or a callable/import path `pkg.mod:func` taking the state and returning a case key."""
    cases: dict[str, str] = Field(default_factory=dict)
    """Case value (as text) -> next node name or END."""
    when: dict[str, str] = Field(default_factory=dict)
    """Condition -> next node, tried in order before `on`/`cases`, e.g. `{"count >= rounds": END}`."""
    default: str | None = None
    """Next node when no case matches (without it, an unmatched value is an error at run time)."""


class ParallelSpec(StrictConfig):
    """Fan-out from `source` to every branch at once, then join."""

    source: str
    """Node after which the branches start."""
    branches: list[str]
    """Nodes that run concurrently."""
    join: str
    """Node that runs once every branch has finished."""


class WorkflowSpec(StrictConfig):
    """A whole workflow definition."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, arbitrary_types_allowed=True)

    name: str
    """Workflow name (shown in runs and diagrams)."""
    description: str = ""
    """One line on what the workflow does."""
    state: dict[str, FieldSpec] = Field(default_factory=dict)
    """State keys with their type and reducer."""
    state_class: Any = None
    """Python state schema (TypedDict or pydantic model), when defined in Python; overrides `state` at compile."""
    start: str | None = None
    """First node (defaults to the first node defined)."""
    nodes: dict[str, NodeSpec] = Field(default_factory=dict)
    """Node name -> what it does."""
    edges: list[tuple[str, str]] = Field(default_factory=list)
    """Unconditional edges (source, target); target may be END."""
    routes: list[RouteSpec] = Field(default_factory=list)
    """Conditional edges."""
    parallel: list[ParallelSpec] = Field(default_factory=list)
    """Parallel fan-out/join groups."""
    step_limit: int | None = None
    """Most super-steps a run may take (LangGraph recursion limit); required for loops without a conditional exit."""
    interrupt_before: list[str] = Field(default_factory=list)
    """Pause before these nodes for human approval."""
    tools: list[str] = Field(default_factory=list)
    """Tool packs (`editor`, `my_pkg.tools`) available to tool nodes and `ctx.call_tool`."""
    node_types: list[str] = Field(default_factory=list)
    """Modules of extra node types (`my_pkg.nodes`, or `nodes.py` next to the workflow), each with a
    `NODE_TYPES` list; installed plugins register theirs under the `agentflow.node_types` entry point."""
    mcp_servers: list[McpServerConfig] = Field(default_factory=list)
    """MCP servers whose tools join tool nodes, `ctx.call_tool` and agent nodes (an agent node's
    `args: {mcp_servers: [NAME]}` narrows which); started on first use, stopped when the run ends."""
    model: str | None = None
    """Default model spec for agent nodes (overridden by `agentflow run --model`)."""
    source_path: str | None = None
    """File the spec was loaded from (set by the loader)."""

    def first_node(self) -> str | None:
        return self.start or next(iter(self.nodes), None)


def is_end(name: str) -> bool:
    return name in END_ALIASES


def flow_edges(spec: WorkflowSpec, *, on_error: bool = False) -> list[tuple[str, str, str, str]]:
    """(source, target, kind, label) of every edge of the control flow: kind `edge`, `route` (labelled; with
    `on_error`, the nodes' `on_error:` exits too), `parallel` or `join`."""
    edges = [(a, b, "edge", "") for a, b in spec.edges]
    for r in spec.routes:
        on = r.on if isinstance(r.on, str) else getattr(r.on, "__name__", "route")
        edges += [(r.source, t, "route", cond) for cond, t in r.when.items()]
        edges += [(r.source, t, "route", f"{on}={case}") for case, t in r.cases.items()]
        edges += [(r.source, r.default, "route", "default")] if r.default else []
    if on_error:
        edges += [(name, node.on_error, "route", "on_error") for name, node in spec.nodes.items() if node.on_error]
    for p in spec.parallel:
        for b in p.branches:
            edges += [(p.source, b, "parallel", ""), (b, p.join, "join", "")]
    return edges
