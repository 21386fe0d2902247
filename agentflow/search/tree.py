"""The search tree's bookkeeping, and its record in the run's events (`search.node`, same schema as linear runs).

Each node is emitted when it is created and evaluated; `finish()` emits the nodes whose visits, value or
usage changed afterwards (marked `final`), so the last `search.node` event of a node id is its final state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentflow.events import Event, EventLog
from agentflow.search.types import Action, NodeState, SearchUsage, TreeNode, Verification


class Node:
    """A node of the search tree (internal; `TreeNode` is its public record)."""

    __slots__ = ("_emitted", "action", "children", "closed", "depth_limited", "expansions", "id", "parent", "pending", "prior",
                 "state", "usage", "value_sum", "verification", "virtual", "visits")

    def __init__(self, node_id: str, parent: Node | None, action: Action | None, state: NodeState) -> None:
        self.id = node_id
        self.parent = parent
        self.action = action
        self.state = state
        self.prior = action.prior if action is not None else 1.0
        self.children: list[Node] = []
        self.visits = 0
        self.value_sum = 0.0
        self.virtual = 0.0
        self.usage = SearchUsage()
        self.verification: Verification | None = None
        self.pending = False
        self.closed = False
        self.depth_limited = False
        self.expansions = 0
        self._emitted: tuple[Any, ...] | None = None

    @property
    def value(self) -> float:
        return self.value_sum / self.visits if self.visits else 0.0

    def path(self) -> list[Node]:
        out: list[Node] = []
        node: Node | None = self
        while node is not None:
            out.append(node)
            node = node.parent
        out.reverse()
        return out

    def path_usage(self) -> SearchUsage:
        total = SearchUsage()
        for node in self.path():
            total.merge(node.usage)
        return total

    def record(self) -> TreeNode:
        v = self.verification
        return TreeNode(
            node_id=self.id, parent_id=self.parent.id if self.parent else None,
            action=self.action.text if self.action else None, value=self.value, visits=self.visits,
            snapshot_id=self.state.snapshot_id, usage=self.usage, depth=self.state.depth,
            terminal=self.state.done, passed=v.passed if v is not None else None,
        )

    def _signature(self) -> tuple[Any, ...]:
        u = self.usage
        return (self.visits, self.value_sum, u.model_calls, u.tool_calls, u.input_tokens, u.output_tokens)


class SearchTree:
    """Owns the nodes, in creation order, and writes them to the event log."""

    def __init__(self, strategy: str, events: EventLog | None = None) -> None:
        self.strategy = strategy
        self.events = events
        self.nodes: list[Node] = []

    def add(self, node_id: str, parent: Node | None, action: Action | None, state: NodeState) -> Node:
        node = Node(node_id, parent, action, state)
        if parent is not None:
            parent.children.append(node)
        self.nodes.append(node)
        return node

    def emit(self, node: Node, *, final: bool = False) -> None:
        node._emitted = node._signature()
        if self.events is not None:
            data = node.record().event_data()
            data["strategy"] = self.strategy
            ref = node.state.data.get("candidate_id") if isinstance(node.state.data, dict) else None
            if isinstance(ref, str):  # what the node's state came from (a repair's candidate), for viewers
                data["candidate_id"] = ref
            if final:
                data["final"] = True
            self.events.emit("search.node", node_id=node.id, parent_id=node.parent.id if node.parent else None,
                             **data)

    def emit_event(self, event: str, /, **data: Any) -> None:
        if self.events is not None:
            self.events.emit(event, strategy=self.strategy, **data)

    def finish(self) -> list[TreeNode]:
        """Emit nodes that changed since they were last emitted; return the whole tree."""
        for node in self.nodes:
            if node._emitted != node._signature():
                self.emit(node, final=True)
        return [node.record() for node in self.nodes]


def tree_from_events(events: Iterable[Event]) -> list[TreeNode]:
    """Rebuild the tree from `search.node` events (the last event of each node id wins), in creation order."""
    latest: dict[str, TreeNode] = {}
    for ev in events:
        if ev.kind != "search.node" or ev.node_id is None:
            continue
        d = ev.data
        latest[ev.node_id] = TreeNode(
            node_id=ev.node_id, parent_id=ev.parent_id, action=d.get("action"), value=d.get("value", 0.0),
            visits=d.get("visits", 0), snapshot_id=d.get("snapshot_id"), usage=SearchUsage(**d.get("usage", {})),
            depth=d.get("depth", 0), terminal=d.get("terminal", False), passed=d.get("passed"),
        )
    return list(latest.values())
