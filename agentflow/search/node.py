"""Search inside a workflow: `SearchNode` runs a search as one graph node; `GraphRolloutPolicy` makes a
rollout subgraph (a compiled LangGraph, or any async `state -> state` callable) a best-of-N policy."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from agentflow.budget import Budget
from agentflow.errors import UserError
from agentflow.events import EventLog
from agentflow.search.protocols import RolloutContext, Workspace, WorkspacePool
from agentflow.search.types import Action, NodeState, SearchResult


class Search(Protocol):
    async def run(
        self,
        initial: NodeState | None = None,
        *,
        budget: Budget | None = None,
        events: EventLog | None = None,
        workspaces: WorkspacePool | Workspace | list[Workspace] | None = None,
    ) -> SearchResult: ...


class GraphRolloutPolicy:
    """Each rollout invokes `graph` with `inputs(state)` plus `{seed_key: <seeded int>}` and takes the final
    output from `output_key` of the returned state. Rollouts are opaque, so it serves best-of-N, not MCTS."""

    def __init__(
        self,
        graph: Any,
        *,
        inputs: Mapping[str, Any] | Callable[[NodeState], Mapping[str, Any]],
        output_key: str,
        seed_key: str | None = "seed",
    ) -> None:
        self.graph = graph
        self.inputs = inputs
        self.output_key = output_key
        self.seed_key = seed_key

    async def _invoke(self, data: dict[str, Any]) -> Mapping[str, Any]:
        if hasattr(self.graph, "ainvoke"):
            final: Mapping[str, Any] = await self.graph.ainvoke(data)
            return final
        out = self.graph(data)
        result: Mapping[str, Any] = await out if inspect.isawaitable(out) else out
        return result

    async def rollout(self, state: NodeState, ctx: RolloutContext) -> NodeState:
        data = dict(self.inputs(state) if callable(self.inputs) else self.inputs)
        if self.seed_key is not None:
            data[self.seed_key] = ctx.rng.randrange(2**31)
        final = await self._invoke(data)
        if self.output_key not in final:
            raise UserError(f"rollout graph returned no {self.output_key!r}",
                            hint=f"set output_key to one of {sorted(final)}")
        value = final[self.output_key]
        return state.child(done=True, output=value if isinstance(value, str) else str(value),
                           data={"final_state": dict(final)})

    async def propose(self, state: NodeState, k: int, ctx: RolloutContext) -> list[Action]:
        raise UserError("a rollout graph cannot propose single steps", hint="use BestOfN with GraphRolloutPolicy")

    async def apply(self, state: NodeState, action: Action, ctx: RolloutContext) -> NodeState:
        raise UserError("a rollout graph cannot apply single steps", hint="use BestOfN with GraphRolloutPolicy")


class SearchNode:
    """A graph node `(state, ctx) -> {output_key: report}` that runs `search` under the run's budget and
    events (from the node context, unless given here). The report is `SearchResult.summary()` with the best
    output under `best_output`."""

    def __init__(
        self,
        search: Search,
        *,
        output_key: str = "search",
        initial: Callable[[Mapping[str, Any]], NodeState] | None = None,
        budget: Budget | None = None,
        events: EventLog | None = None,
        workspaces: WorkspacePool | Workspace | list[Workspace] | None = None,
        name: str = "search",
    ) -> None:
        self.search = search
        self.output_key = output_key
        self.initial = initial
        self.budget = budget
        self.events = events
        self.workspaces = workspaces
        self.__name__ = name

    async def __call__(self, state: Mapping[str, Any], ctx: Any = None) -> dict[str, Any]:
        run = getattr(ctx, "run", None)
        budget = self.budget or getattr(run, "budget", None)
        events = self.events or getattr(run, "events", None)
        result = await self.search.run(self.initial(state) if self.initial else None, budget=budget,
                                       events=events, workspaces=self.workspaces)
        report = result.summary()
        report["best_output"] = result.best.output if result.best else None
        return {self.output_key: report}


def search_node(search: Search, **options: Any) -> SearchNode:
    """Wrap a configured search (BestOfN, MCTS) as a graph node; see `SearchNode`."""
    return SearchNode(search, **options)

