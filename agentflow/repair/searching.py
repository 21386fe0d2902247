"""Driving `agentflow.search` over a repair's rollouts: best-of-N chains or an MCTS tree of attempts."""

from __future__ import annotations

import math
from typing import Any, Literal

from agentflow.budget import Budget
from agentflow.events import EventLog
from agentflow.repair.config import RepairConfig
from agentflow.repair.policy import RepairPolicy
from agentflow.repair.workbench import Verification


class TaskEvents(EventLog):
    """The run's event log as seen by one task: node ids get the instance id in front, so the search trees and
    graph nodes of many tasks share one events file."""

    def __init__(self, inner: EventLog, instance_id: str) -> None:
        super().__init__(None, run_id=inner.run_id)
        self.inner, self.instance_id = inner, instance_id
        self.capture_content = inner.capture_content

    def emit(self, kind: str, /, *, node_id: str | None = None, parent_id: str | None = None, **data: Any) -> Any:
        prefix = f"{self.instance_id}/"
        return self.inner.emit(kind, node_id=prefix + node_id if node_id else node_id,
                               parent_id=prefix + parent_id if parent_id else parent_id,
                               instance_id=self.instance_id, **data)


async def run_search(policy: RepairPolicy, cfg: RepairConfig, algorithm: Literal["best_of_n", "mcts"],
                     base: Verification, budget: Budget, events: EventLog) -> None:
    """Search from the base state: `best_of_n` runs n chains (`strategy: single` is one), `mcts` a tree of
    about n * max_attempts samples (`mcts_k` per expansion, concurrent under virtual loss)."""
    from agentflow.search import MCTS, BestOfN, FunctionVerifier
    from agentflow.search.types import Verification as SearchVerification

    def value(cand: Any) -> SearchVerification:
        v = cand.state.data.get("verification")
        if not isinstance(v, Verification):
            return SearchVerification()
        # a value agent's value (`swe.value`) guides the search where there is one; the tests decide `passed`
        return SearchVerification(score=float(cand.state.data.get("value", v.score)), passed=v.passed)

    verifier = FunctionVerifier(value, name="tests")
    tree_events = TaskEvents(events, policy.iid)
    root = policy.root(base)
    if algorithm == "mcts":
        expansions = math.ceil(cfg.n * cfg.max_attempts / cfg.mcts_k)
        await MCTS(policy, verifier, k=cfg.mcts_k, concurrency=max(1, cfg.concurrency // cfg.mcts_k), c=cfg.mcts_c,
                   max_depth=cfg.max_attempts, max_expansions=expansions, stop_on_solution=cfg.stop_on_success,
                   seed=cfg.seed, charge_budget=False).run(root, budget=budget, events=tree_events)
        return
    await BestOfN(policy, verifier, n=cfg.n, concurrency=min(cfg.n, cfg.concurrency), seed=cfg.seed,
                  charge_budget=False).run(root, budget=budget, events=tree_events)
