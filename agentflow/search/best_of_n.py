"""Best-of-N: N independent rollouts run concurrently, verified together, one selected.

The report puts coverage (was any rollout correct?) next to the selected candidate, so a selection gap
(a correct candidate existed but another was picked) is visible.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from typing import Any, Literal, TypeVar

from pydantic import Field

from agentflow.budget import Budget, BudgetExceeded
from agentflow.config import StrictConfig, validate_config
from agentflow.events import EventLog
from agentflow.search.protocols import (
    Policy,
    RolloutContext,
    Verifier,
    VerifyContext,
    Workspace,
    WorkspacePool,
    as_pool,
)
from agentflow.search.remote import RemoteSteps, SearchExecutor, WorkspaceShipper, remote_steps
from agentflow.search.report import Oracle, Selection, coverage_and_pass_at_k, judge, select
from agentflow.search.tree import SearchTree
from agentflow.search.types import Action, Candidate, NodeState, SearchResult, SearchUsage


class BestOfNConfig(StrictConfig):
    """Settings of a best-of-N search."""

    n: int = Field(8, ge=1)
    """Number of rollouts."""
    concurrency: int = Field(8, ge=1)
    """Rollouts running at the same time."""
    select: Selection = "score"
    """How the result is picked: `score` (verifier score), `tests` (most passing tests), `vote` (majority over
    normalised outputs) or `tests_then_critic` (tests first, the critic's score breaks ties)."""
    seed: int = 0
    """Seed of every rollout's rng (rollout i gets `seed:i`): replayed or simulated runs are deterministic."""
    executor: Literal["in-process", "ray"] = "in-process"
    """Where the search's steps run: here, or as Ray tasks (a node's `executor: ray`; the `executor=` argument,
    e.g. an `ExecutorConfig` with a cluster address, takes precedence). See `search.remote`."""


@contextlib.asynccontextmanager
async def borrow(pool: WorkspacePool | None, snapshot_id: str | None) -> AsyncIterator[Workspace | None]:
    """A workspace from the pool restored to `snapshot_id` (None without a pool)."""
    if pool is None:
        yield None
        return
    async with pool.acquire() as ws:
        if snapshot_id is not None:
            await ws.restore(snapshot_id)
        yield ws


async def initial_state(initial: NodeState | None, pool: WorkspacePool | None) -> NodeState:
    state = initial if initial is not None else NodeState()
    if pool is not None and state.snapshot_id is None:
        async with pool.acquire() as ws:
            state.snapshot_id = await ws.snapshot()
    return state


C = TypeVar("C", bound=StrictConfig)


def merged_config(cls: type[C], config: C | None, settings: dict[str, Any]) -> C:
    """`config` (or the defaults) with keyword overrides, validated (a bad value is a one-line ConfigError)."""
    base = config.model_dump() if config is not None else {}
    return validate_config(cls, {**base, **settings}, source=cls.__name__)


class BestOfN:
    """`await BestOfN(policy, verifier, n=8).run(budget=..., events=...)` -> SearchResult."""

    strategy = "best_of_n"

    def __init__(
        self,
        policy: Policy,
        verifier: Verifier | None = None,
        *,
        config: BestOfNConfig | None = None,
        oracle: Oracle | None = None,
        charge_budget: bool = True,
        executor: SearchExecutor = None,
        shipper: WorkspaceShipper | None = None,
        **settings: Any,
    ) -> None:
        self.policy = policy
        self.verifier = verifier
        self.config = merged_config(BestOfNConfig, config, settings)
        self.oracle = oracle
        self.charge_budget = charge_budget
        """False when the policy's model charges the budget itself (an InstrumentedModel)."""
        self.executor = executor if executor is not None else self.config.executor
        """Where rollouts run: in process (None) or e.g. "ray" (each a Ray task; see `search.remote`)."""
        self.shipper = shipper
        """With a remote executor and workspaces: how a workspace snapshot travels to a worker and back."""

    async def run(
        self,
        initial: NodeState | None = None,
        *,
        budget: Budget | None = None,
        events: EventLog | None = None,
        workspaces: WorkspacePool | Workspace | list[Workspace] | None = None,
    ) -> SearchResult:
        async with remote_steps(self.executor, self.shipper) as remote:
            return await self._run(initial, budget, events, workspaces, remote)

    async def _run(self, initial: NodeState | None, budget: Budget | None, events: EventLog | None,
                   workspaces: WorkspacePool | Workspace | list[Workspace] | None,
                   remote: RemoteSteps | None) -> SearchResult:
        cfg = self.config
        pool = as_pool(workspaces)
        start = await initial_state(initial, pool)
        tree = SearchTree(self.strategy, events)
        root = tree.add("0", None, None, start)
        tree.emit_event("search.start", n=cfg.n, concurrency=cfg.concurrency, select=cfg.select, seed=cfg.seed)
        gate = asyncio.Semaphore(cfg.concurrency)

        async def one(i: int) -> tuple[NodeState, SearchUsage] | None:
            async with gate:
                if budget is not None and budget.exceeded() is not None:
                    return None
                if remote is not None:
                    try:
                        return await remote.step(self.policy, start, None, seed=f"{cfg.seed}:{i}", node_id=f"0.{i}",
                                                 parent_id="0", budget=budget, events=events, pool=pool)
                    except BudgetExceeded:
                        return None
                ctx = RolloutContext(rng=random.Random(f"{cfg.seed}:{i}"), node_id=f"0.{i}", parent_id="0",
                                     budget=budget, events=events, charge_budget=self.charge_budget)
                async with borrow(pool, start.snapshot_id) as ws:
                    ctx.workspace = ws
                    try:
                        state = await self.policy.rollout(start, ctx)
                    except BudgetExceeded:
                        return None
                    if ws is not None:
                        state.snapshot_id = await ws.snapshot()
                return state, ctx.usage

        outcomes = await asyncio.gather(*(one(i) for i in range(cfg.n)))
        nodes = []
        for i, outcome in enumerate(outcomes):
            if outcome is None:
                continue
            state, usage = outcome
            node = tree.add(f"0.{i}", root, Action(text=f"rollout {i}"), state)
            node.usage = usage
            nodes.append(node)
        candidates = [Candidate(node.id, node.state, usage=node.usage) for node in nodes if node.state.done]
        vctx = VerifyContext(workspaces=pool, budget=budget, events=events)
        if self.verifier is not None and candidates:
            for cand, verification in zip(candidates, await self.verifier.verify(candidates, vctx), strict=True):
                cand.verification = verification
        by_id = {c.node_id: c for c in candidates}
        for node in nodes:
            found = by_id.get(node.id)
            node.verification = found.verification if found else None
            node.visits, node.value_sum = 1, found.score if found else 0.0
            root.visits += 1
            root.value_sum += node.value_sum
            tree.emit(node)
        await judge(candidates, self.oracle)
        best = select(candidates, cfg.select)
        coverage, pass_k = coverage_and_pass_at_k(candidates, len(nodes), self.oracle is not None)
        kind = budget.exceeded() if budget is not None else None
        complete = len(nodes) == cfg.n and all(n.state.done for n in nodes)
        stop = "completed" if complete or kind is None else "budget"
        if stop == "budget":
            tree.emit_event("budget.exceeded", kind=kind)
        usage = SearchUsage()
        for node in nodes:
            usage.merge(node.usage)
        usage.merge(vctx.usage)
        root.usage = SearchUsage()
        result = SearchResult(best=best, candidates=candidates, stop_reason=stop, coverage=coverage,
                              pass_at_k=pass_k, tree=tree.finish(), budget_kind=kind if stop == "budget" else None,
                              usage=usage)
        tree.emit_event("search.end", **result.summary())
        return result
