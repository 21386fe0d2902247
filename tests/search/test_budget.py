"""Every budget kind stops a search within one step of its limit, and the best candidate so far is returned."""

from __future__ import annotations

import pytest

from agentflow.budget import Budget
from agentflow.events import EventLog
from agentflow.search import MCTS, BestOfN, RolloutContext, SimulatedPolicy
from agentflow.search.types import Action, NodeState

# One step = one proposal: 100 tokens, $0.001, 1 model call per sample, 1 tool call per applied step.
LIMITS = {"tokens": 2000, "usd": 0.02, "model_calls": 20, "tool_calls": 20, "wall_seconds": 0.4}


class WatchedPolicy(SimulatedPolicy):
    """Records, at the start of every step, whether the budget was already exhausted."""

    def __init__(self, steps: int = 3) -> None:
        super().__init__(steps=steps, p=0.5, options=3, tool_calls_per_step=1, latency_s=0.02)
        self.started_after_limit = 0

    async def propose(self, state: NodeState, k: int, ctx: RolloutContext) -> list[Action]:
        if ctx.exceeded() is not None:
            self.started_after_limit += 1
        return await super().propose(state, k, ctx)


def step_cost(kind: str, samples: int) -> float:
    return {"tokens": 100 * samples, "usd": 0.001 * samples, "model_calls": samples, "tool_calls": samples,
            "wall_seconds": 0.0}[kind]


def check(kind: str, budget: Budget, policy: WatchedPolicy, result, samples: int) -> None:
    assert result.stop_reason == "budget" and result.budget_kind == kind
    used = getattr(budget.used, kind)
    if kind == "wall_seconds":
        # The limit can pass between the search's check and the step's own: at most one step starts late.
        assert policy.started_after_limit <= 1
    else:
        assert policy.started_after_limit == 0
        assert used <= LIMITS[kind] + step_cost(kind, samples) + 1e-9
    assert result.candidates, "some rollouts finished before the limit"
    assert result.best is not None
    assert result.best.score == max(c.score for c in result.candidates)
    if any(c.verified for c in result.candidates):
        assert result.best.verified


@pytest.mark.parametrize("kind", sorted(LIMITS))
async def test_best_of_n_stops_within_one_step_of_each_budget_kind(kind: str) -> None:
    policy = WatchedPolicy()
    budget = Budget(**{kind: LIMITS[kind]})
    log = EventLog()
    result = await BestOfN(policy, policy.test_verifier(), n=100, concurrency=1).run(budget=budget, events=log)
    check(kind, budget, policy, result, samples=1)
    assert [e.data["kind"] for e in log.events if e.kind == "budget.exceeded"] == [kind]


@pytest.mark.parametrize("kind", sorted(LIMITS))
async def test_mcts_stops_within_one_step_of_each_budget_kind(kind: str) -> None:
    policy = WatchedPolicy(steps=5)  # a tree big enough to outlast every limit
    budget = Budget(**{kind: LIMITS[kind]})
    result = await MCTS(policy, policy.test_verifier(), k=2, concurrency=1, stop_on_solution=False).run(budget=budget)
    check(kind, budget, policy, result, samples=2)


async def test_a_child_budget_stops_the_search_and_charges_the_parent() -> None:
    parent = Budget(model_calls=1000)
    child = parent.child(model_calls=12)
    policy = SimulatedPolicy(steps=3, p=0.5)
    result = await BestOfN(policy, policy.test_verifier(), n=10, concurrency=1).run(budget=child)
    assert result.stop_reason == "budget" and result.budget_kind == "model_calls"
    assert parent.used.model_calls == child.used.model_calls == 12
    assert len(result.candidates) == 4


async def test_concurrent_mcts_caps_each_wave_at_the_model_calls_left() -> None:
    policy = SimulatedPolicy(steps=6, p=0.5, calls_per_proposal="call")
    budget = Budget(model_calls=10)
    await MCTS(policy, policy.test_verifier(), k=3, concurrency=4, stop_on_solution=False).run(budget=budget)
    assert budget.used.model_calls == 10
