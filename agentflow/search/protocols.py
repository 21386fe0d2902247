"""What a search needs from the rest of agentflow, as small protocols.

- `Policy`: proposes next steps from a node, carries one out, or runs a whole rollout (an agent, a graph).
- `Workspace`: a state that can be snapshotted and restored (a `Sandbox` is one).
- `Verifier`: scores candidates (tests, a critic, a vote, or a composition).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from agentflow.budget import Budget, BudgetKind
from agentflow.events import EventLog
from agentflow.models.base import Usage
from agentflow.search.types import Action, Candidate, NodeState, SearchUsage, Verification


@runtime_checkable
class Workspace(Protocol):
    """Anything whose state can be saved and brought back by id; `agentflow.sandbox` sandboxes satisfy it."""

    async def snapshot(self) -> str: ...

    async def restore(self, snapshot_id: str) -> None: ...


class WorkspacePool:
    """Workspaces that concurrent branches borrow one at a time. Snapshots must be restorable in any member
    (sandboxes started from the same base with a shared snapshot store are)."""

    def __init__(self, workspaces: Sequence[Workspace]) -> None:
        self._free: asyncio.Queue[Workspace] = asyncio.Queue()
        self.size = len(workspaces)
        for ws in workspaces:
            self._free.put_nowait(ws)

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[Workspace]:
        ws = await self._free.get()
        try:
            yield ws
        finally:
            self._free.put_nowait(ws)


def as_pool(workspaces: WorkspacePool | Workspace | Sequence[Workspace] | None) -> WorkspacePool | None:
    if workspaces is None or isinstance(workspaces, WorkspacePool):
        return workspaces
    if isinstance(workspaces, Workspace):
        return WorkspacePool([workspaces])
    return WorkspacePool(list(workspaces))


@dataclass
class RolloutContext:
    """Handed to every policy call: a seeded rng, the workspace (already restored to the node's snapshot),
    the run's budget and events, and the usage counter of the node being built."""

    rng: random.Random
    node_id: str
    parent_id: str | None = None
    workspace: Workspace | None = None
    budget: Budget | None = None
    events: EventLog | None = None
    usage: SearchUsage = field(default_factory=SearchUsage)
    charge_budget: bool = True
    """False when the policy's model already charges the budget itself (an `InstrumentedModel`)."""

    def charge_model(self, usage: Usage | None = None, *, calls: int = 1) -> None:
        """Count a model call against this node and (unless the model does it itself) the budget."""
        self.usage.add_model(usage, calls=calls)
        if self.budget is not None and self.charge_budget:
            tokens = usage.total_tokens if usage is not None else 0
            self.budget.charge_model(tokens=tokens, usd=usage.cost_usd if usage else 0.0, calls=calls)

    def charge_tool(self, calls: int = 1) -> None:
        self.usage.tool_calls += calls
        if self.budget is not None and self.charge_budget:
            self.budget.charge_tool(calls)

    def exceeded(self) -> BudgetKind | None:
        return self.budget.exceeded() if self.budget is not None else None


@runtime_checkable
class Policy(Protocol):
    """Generates steps. Best-of-N uses `rollout`; MCTS uses `propose` then `apply`."""

    async def propose(self, state: NodeState, k: int, ctx: RolloutContext) -> list[Action]:
        """Up to `k` candidate next steps from `state` (e.g. one model call with n=k)."""
        ...

    async def apply(self, state: NodeState, action: Action, ctx: RolloutContext) -> NodeState:
        """Carry out `action` (the workspace is at `state.snapshot_id`) and return the child state."""
        ...

    async def rollout(self, state: NodeState, ctx: RolloutContext) -> NodeState:
        """Run from `state` to a finished state (or until the budget is exhausted)."""
        ...


class StepPolicy:
    """Base for step-wise policies: `rollout` is propose(k=1) + apply until done, `max_steps` or budget."""

    max_steps: int = 50

    async def propose(self, state: NodeState, k: int, ctx: RolloutContext) -> list[Action]:
        raise NotImplementedError

    async def apply(self, state: NodeState, action: Action, ctx: RolloutContext) -> NodeState:
        raise NotImplementedError

    async def rollout(self, state: NodeState, ctx: RolloutContext) -> NodeState:
        steps = 0
        while not state.done and steps < self.max_steps and ctx.exceeded() is None:
            actions = await self.propose(state, 1, ctx)
            if not actions:
                break
            state = await self.apply(state, actions[0], ctx)
            steps += 1
        return state


@dataclass
class VerifyContext:
    """What verifiers may use: workspaces to run tests in, the budget, the events log."""

    workspaces: WorkspacePool | None = None
    budget: Budget | None = None
    events: EventLog | None = None
    usage: SearchUsage = field(default_factory=SearchUsage)
    """Usage of verifier model calls (critics), added to the search's usage."""


@runtime_checkable
class Verifier(Protocol):
    """Scores candidates. Given a batch so that votes can compare candidates; one Verification per candidate,
    in order. Unfinished states (MCTS partial rollouts) have `state.done == False` and no output."""

    name: str

    async def verify(self, candidates: Sequence[Candidate], ctx: VerifyContext) -> list[Verification]: ...
