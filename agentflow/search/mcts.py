"""Monte Carlo tree search over partial rollouts, with concurrent expansions.

A node is a partial rollout (messages + workspace snapshot). One iteration ("wave") selects up to
`concurrency` leaves one after another, each selection adding a virtual loss along its path so the next one
prefers other branches; the leaves are expanded at the same time (the policy proposes k steps from each, the
steps are carried out in workspaces borrowed from the pool, the verifier values the children); results are
folded back in selection order, so a seeded run with a replayed or simulated policy builds the same tree
whatever order the concurrent calls finish in.
"""

from __future__ import annotations

import asyncio
import math
import random
from typing import Any, Literal

from pydantic import Field

from agentflow.budget import Budget, BudgetExceeded, BudgetKind
from agentflow.config import StrictConfig
from agentflow.events import EventLog
from agentflow.search.best_of_n import borrow, initial_state, merged_config
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
from agentflow.search.report import Oracle, coverage_and_pass_at_k, judge, select
from agentflow.search.tree import Node, SearchTree
from agentflow.search.types import Action, Candidate, NodeState, SearchResult, SearchUsage, Verification


class MCTSConfig(StrictConfig):
    """Settings of an MCTS search."""

    k: int = Field(3, ge=1)
    """Children sampled from the policy per expansion."""
    concurrency: int = Field(4, ge=1)
    """Leaves expanded at the same time (virtual loss spreads them over the tree)."""
    selection: Literal["uct", "puct"] = "uct"
    """UCT (`Q + c*sqrt(ln N / n)`) or PUCT (`Q + c*P*sqrt(N) / (1 + n)`, P = the policy's normalised prior)."""
    c: float = Field(0.2, ge=0)
    """Exploration constant (values are in [0, 1]; larger explores more)."""
    virtual_loss: float = Field(1.0, ge=0)
    """Visits of value 0 added along a path while its leaf is being expanded."""
    max_depth: int = Field(10, ge=1)
    """Nodes this deep are not expanded."""
    max_expansions: int | None = Field(None, ge=1)
    """Stop after this many expansions (None: only budget, solution or an exhausted tree stop the search)."""
    widening: int = Field(2, ge=0)
    """Extra expansions a stuck node may get: when none of its children scores above the node itself, the
    next selection that reaches it samples k more children (at most this many times). 0: one expansion."""
    stop_on_solution: bool = True
    """Stop as soon as a finished rollout passes the verifier."""
    seed: int = 0
    """Seed of every node's rng (node `0.2.1` gets `seed:0.2.1`)."""
    executor: Literal["in-process", "ray"] = "in-process"
    """Where the search's steps run: here, or as Ray tasks (a node's `executor: ray`; the `executor=` argument,
    e.g. an `ExecutorConfig` with a cluster address, takes precedence). See `search.remote`."""


Expansion = tuple[list[Action], list[NodeState], list[SearchUsage], list[Verification | None], SearchUsage]


class MCTS:
    """`await MCTS(policy, verifier, k=3, concurrency=4).run(budget=..., events=...)` -> SearchResult."""

    strategy = "mcts"

    def __init__(
        self,
        policy: Policy,
        verifier: Verifier,
        *,
        config: MCTSConfig | None = None,
        oracle: Oracle | None = None,
        charge_budget: bool = True,
        executor: SearchExecutor = None,
        shipper: WorkspaceShipper | None = None,
        **settings: Any,
    ) -> None:
        self.policy = policy
        self.verifier = verifier
        self.config = merged_config(MCTSConfig, config, settings)
        self.oracle = oracle
        self.charge_budget = charge_budget
        self.executor = executor if executor is not None else self.config.executor
        """Where each child's `apply` runs: in process (None) or e.g. "ray" (a Ray task; see `search.remote`);
        proposals, verification and the tree stay here."""
        self.shipper = shipper
        """With a remote executor and workspaces: how a workspace snapshot travels to a worker and back."""

    # selection ---------------------------------------------------------------------------------------------

    def _score(self, child: Node, parent_n: float, prior_total: float) -> float:
        cfg = self.config
        n = child.visits + child.virtual
        q = child.value_sum / n if n else 0.0
        if cfg.selection == "uct":
            return q + cfg.c * math.sqrt(math.log(max(parent_n, 1.0)) / n) if n else math.inf
        prior = child.prior / prior_total if prior_total > 0 else 1.0
        return q + cfg.c * prior * math.sqrt(parent_n) / (1.0 + n)

    @staticmethod
    def _stuck(node: Node) -> bool:
        own = node.verification.score if node.verification is not None else 0.0
        return all((c.verification.score if c.verification is not None else 0.0) <= own for c in node.children)

    def _select(self, node: Node) -> list[Node] | None:
        """Path to the most promising open leaf under `node` (None when none is open)."""
        if node.closed or node.pending:
            return None
        if not node.children:
            return [node]
        if node.expansions <= self.config.widening and self._stuck(node):
            return [node]
        parent_n = node.visits + node.virtual
        prior_total = sum(c.prior for c in node.children)
        ranked = sorted(
            ((-self._score(c, parent_n, prior_total), i, c) for i, c in enumerate(node.children)
             if not c.closed and not c.pending),
        )
        for _, _, child in ranked:
            path = self._select(child)
            if path is not None:
                return [node, *path]
        return None

    # expansion ---------------------------------------------------------------------------------------------

    async def _expand(self, leaf: Node, pool: WorkspacePool | None, budget: Budget | None,
                      events: EventLog | None, vctx: VerifyContext, remote: RemoteSteps | None = None) -> Expansion:
        cfg = self.config

        def context(node_id: str, parent_id: str | None) -> RolloutContext:
            return RolloutContext(rng=random.Random(f"{cfg.seed}:{node_id}"), node_id=node_id, parent_id=parent_id,
                                  budget=budget, events=events, charge_budget=self.charge_budget)

        base = len(leaf.children)  # > 0 when progressive widening expands a node again
        ctx = context(leaf.id if base == 0 else f"{leaf.id}#{base}", leaf.parent.id if leaf.parent else None)
        ctx.node_id = leaf.id
        async with borrow(pool, leaf.state.snapshot_id) as ws:
            ctx.workspace = ws
            actions = list(await self.policy.propose(leaf.state, cfg.k, ctx))[: cfg.k]

        async def apply(i: int, action: Action) -> tuple[NodeState, SearchUsage]:
            if remote is not None:
                child_id = f"{leaf.id}.{base + i}"
                return await remote.step(self.policy, leaf.state, action, seed=f"{cfg.seed}:{child_id}",
                                         node_id=child_id, parent_id=leaf.id, budget=budget, events=events, pool=pool)
            cctx = context(f"{leaf.id}.{base + i}", leaf.id)
            async with borrow(pool, leaf.state.snapshot_id) as ws:
                cctx.workspace = ws
                state = await self.policy.apply(leaf.state, action, cctx)
                if ws is not None:
                    state.snapshot_id = await ws.snapshot()
            return state, cctx.usage

        applied = await asyncio.gather(*(apply(i, a) for i, a in enumerate(actions)))
        states = [s for s, _ in applied]
        usages = [u for _, u in applied]
        cands = [Candidate(f"{leaf.id}.{base + i}", s) for i, s in enumerate(states)]
        verifications: list[Verification | None] = list(await self.verifier.verify(cands, vctx)) if cands else []
        return actions, states, usages, verifications, ctx.usage

    # the loop ----------------------------------------------------------------------------------------------

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
        tree = SearchTree(self.strategy, events)
        root = tree.add("0", None, None, await initial_state(initial, pool))
        tree.emit(root)
        tree.emit_event("search.start", k=cfg.k, concurrency=cfg.concurrency, selection=cfg.selection,
                        seed=cfg.seed, max_depth=cfg.max_depth)
        vctx = VerifyContext(workspaces=pool, budget=budget, events=events)
        candidates: list[Candidate] = []
        expansions = 0
        solved = False
        budget_kind: BudgetKind | None = None
        while True:
            if solved:
                stop = "solved"
                break
            budget_kind = budget.exceeded() if budget is not None else None
            if budget_kind is not None:
                stop = "budget"
                break
            if root.closed:
                stop = "depth" if any(n.depth_limited for n in tree.nodes) else "exhausted"
                break
            if cfg.max_expansions is not None and expansions >= cfg.max_expansions:
                stop = "iterations"
                break
            wave_size = cfg.concurrency
            if cfg.max_expansions is not None:
                wave_size = min(wave_size, cfg.max_expansions - expansions)
            if budget is not None and (left := budget.remaining("model_calls")) is not None:
                wave_size = max(1, min(wave_size, int(left)))
            paths: list[list[Node]] = []
            for _ in range(wave_size):
                path = self._select(root)
                if path is None:
                    break
                for node in path:
                    node.virtual += cfg.virtual_loss
                path[-1].pending = True
                paths.append(path)
            if not paths:  # every open leaf is already being expanded: cannot happen between waves
                stop = "exhausted"
                break
            outcomes = await asyncio.gather(
                *(self._expand(p[-1], pool, budget, events, vctx, remote) for p in paths), return_exceptions=True
            )
            expansions += len(paths)
            for path, outcome in zip(paths, outcomes, strict=True):
                leaf = path[-1]
                for node in path:
                    node.virtual -= cfg.virtual_loss
                leaf.pending = False
                if isinstance(outcome, BudgetExceeded):
                    continue  # the leaf stays open; the loop stops on the budget check
                if isinstance(outcome, BaseException):
                    raise outcome
                solved |= self._integrate(tree, leaf, path, outcome, candidates)
        await judge(candidates, self.oracle)
        if stop == "budget":
            tree.emit_event("budget.exceeded", kind=budget_kind)
        best = select(candidates, "score")
        coverage, pass_k = coverage_and_pass_at_k(candidates, len(candidates), self.oracle is not None)
        usage = SearchUsage()
        for node in tree.nodes:
            usage.merge(node.usage)
        usage.merge(vctx.usage)
        result = SearchResult(best=best, candidates=candidates, stop_reason=stop, coverage=coverage,
                              pass_at_k=pass_k, tree=tree.finish(), budget_kind=budget_kind, usage=usage)
        tree.emit_event("search.end", expansions=expansions, **result.summary())
        return result

    def _integrate(self, tree: SearchTree, leaf: Node, path: list[Node], outcome: Expansion,
                   candidates: list[Candidate]) -> bool:
        """Add the children of one expansion, back their values up the path; True if one is a solution."""
        cfg = self.config
        actions, states, usages, verifications, propose_usage = outcome
        leaf.usage.merge(propose_usage)
        leaf.expansions += 1
        base = len(leaf.children)
        solved = False
        for i, (action, state, usage, verification) in enumerate(
            zip(actions, states, usages, verifications, strict=True)
        ):
            child = tree.add(f"{leaf.id}.{base + i}", leaf, action, state)
            state.depth = leaf.state.depth + 1
            child.usage = usage
            child.verification = verification
            value = verification.score if verification is not None else 0.0
            child.visits, child.value_sum = 1, value
            for node in path:
                node.visits += 1
                node.value_sum += value
            if state.done:
                child.closed = True
                cand = Candidate(child.id, state, verification=verification, usage=child.path_usage())
                candidates.append(cand)
                solved |= cfg.stop_on_solution and cand.verified
            elif state.depth >= cfg.max_depth:
                child.closed = child.depth_limited = True
            tree.emit(child)
        if not leaf.children or (not actions and not cfg.widening):
            leaf.closed = True
        up: Node | None = leaf.parent if leaf.closed else leaf
        while up is not None and up.children and all(c.closed for c in up.children):
            up.closed = True
            up = up.parent
        return solved
