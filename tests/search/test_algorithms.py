"""Algorithm bars with simulated policies whose success probability is known."""

from __future__ import annotations

import asyncio
import math
import random
from math import comb

import pytest

from agentflow.budget import Budget
from agentflow.events import EventLog
from agentflow.search import (
    MCTS,
    BestOfN,
    RolloutContext,
    SimulatedAnswerPolicy,
    SimulatedPolicy,
    tree_from_events,
)
from agentflow.search.types import Action, NodeState


def within(observed: float, expected: float, runs: int, sigmas: float = 4.5) -> bool:
    sd = math.sqrt(max(expected * (1 - expected), 1e-9) / runs)
    return abs(observed - expected) <= sigmas * sd


async def solve_rate(make, runs: int) -> float:
    results = await asyncio.gather(*(make(seed).run() for seed in range(runs)))
    return sum(1 for r in results if r.best is not None and r.best.correct) / runs


@pytest.mark.parametrize("p,n", [(0.3, 4), (0.1, 8), (0.5, 1)])
async def test_best_of_n_with_a_perfect_verifier_solves_at_one_minus_one_minus_p_to_the_n(p: float, n: int) -> None:
    policy = SimulatedPolicy(steps=1, p=p)
    runs = 1500
    rate = await solve_rate(
        lambda seed: BestOfN(policy, policy.perfect_verifier(), n=n, seed=seed, oracle=policy.oracle), runs
    )
    assert within(rate, 1 - (1 - p) ** n, runs)


async def test_best_of_n_reports_coverage_and_the_selection_gap() -> None:
    policy = SimulatedPolicy(steps=1, p=0.5)
    # A verifier that prefers wrong answers: coverage stays true while the selected candidate is wrong.
    from agentflow.search import FunctionVerifier

    contrary = FunctionVerifier(lambda c: 0.0 if policy.oracle(c) else 1.0, name="contrary")
    gaps = 0
    for seed in range(40):
        result = await BestOfN(policy, contrary, n=6, seed=seed, oracle=policy.oracle).run()
        assert result.coverage == any(c.correct for c in result.candidates)
        assert result.pass_at_k[6] == (1.0 if result.coverage else 0.0)
        c = sum(1 for x in result.candidates if x.correct)
        assert result.pass_at_k[1] == pytest.approx(c / 6)
        if result.coverage and not all(x.correct for x in result.candidates):
            assert result.selection_gap is True
            gaps += 1
    assert gaps > 20


def vote_expectation_clustered(p: float, n: int) -> float:
    """Correct wins the vote iff more than half the answers are correct (ties go to the first cluster)."""
    total = 0.0
    for x in range(n + 1):
        prob = comb(n, x) * p**x * (1 - p) ** (n - x)
        if x > n - x:
            total += prob
    return total


async def test_majority_vote_beats_a_single_sample_when_wrong_answers_are_spread() -> None:
    p, n, runs = 0.4, 9, 800
    policy = SimulatedAnswerPolicy(p=p, wrong="spread", wrong_values=100_000)
    rate = await solve_rate(lambda s: BestOfN(policy, None, n=n, select="vote", seed=s, oracle=policy.oracle), runs)
    # With spread wrong answers two correct answers already win: P(X >= 2) up to collisions,
    # plus the X = 1 cases where the lone correct answer is the first cluster.
    p_at_least_two = 1 - (1 - p) ** n - n * p * (1 - p) ** (n - 1)
    assert rate >= p_at_least_two - 4.5 * math.sqrt(p_at_least_two * (1 - p_at_least_two) / runs)
    assert rate > p + 0.3


async def test_majority_vote_follows_the_wrong_cluster_when_it_outnumbers_the_right_answer() -> None:
    p, n, runs = 0.4, 9, 800
    policy = SimulatedAnswerPolicy(p=p, wrong="clustered")
    rate = await solve_rate(lambda s: BestOfN(policy, None, n=n, select="vote", seed=s, oracle=policy.oracle), runs)
    expected = vote_expectation_clustered(p, n)
    assert within(rate, expected, runs)
    assert rate < p


async def test_mcts_beats_best_of_n_at_equal_model_calls_on_a_multi_step_task() -> None:
    runs = 150
    policy = SimulatedPolicy(steps=5, p=0.5, options=4)

    async def bon(seed: int, calls: int) -> bool:
        result = await BestOfN(policy, policy.test_verifier(), n=calls // policy.steps, seed=seed,
                               oracle=policy.oracle).run(budget=Budget(model_calls=calls))
        return bool(result.best and result.best.correct)

    async def mcts(seed: int, calls: int, concurrency: int) -> tuple[bool, int]:
        budget = Budget(model_calls=calls)
        result = await MCTS(policy, policy.test_verifier(), k=3, concurrency=concurrency, seed=seed,
                            oracle=policy.oracle).run(budget=budget)
        return bool(result.best and result.best.correct), budget.used.model_calls

    # Concurrent waves spend calls on breadth, so four at a time get a larger (equal) budget.
    for calls, concurrency in ((30, 1), (30, 2), (60, 4)):
        bon_rate = sum(await asyncio.gather(*(bon(s, calls) for s in range(runs)))) / runs
        outcomes = await asyncio.gather(*(mcts(s, calls, concurrency) for s in range(runs)))
        assert max(used for _, used in outcomes) <= calls + 3 * concurrency
        mcts_rate = sum(ok for ok, _ in outcomes) / runs
        assert mcts_rate > bon_rate + 0.4, (concurrency, mcts_rate, bon_rate)


class JitteryPolicy(SimulatedPolicy):
    """Same decisions as SimulatedPolicy, but each call takes a random (unseeded) time, so concurrent
    expansions finish in a different order on every run."""

    async def propose(self, state: NodeState, k: int, ctx: RolloutContext) -> list[Action]:
        await asyncio.sleep(random.random() * 0.004)
        return await super().propose(state, k, ctx)

    async def apply(self, state: NodeState, action: Action, ctx: RolloutContext) -> NodeState:
        await asyncio.sleep(random.random() * 0.002)
        return await super().apply(state, action, ctx)


def shape(result) -> list[tuple]:
    return [(n.node_id, n.parent_id, n.action, round(n.value, 9), n.visits, n.terminal, n.usage.model_calls)
            for n in result.tree]


@pytest.mark.parametrize("selection", ["uct", "puct"])
async def test_concurrent_mcts_is_deterministic_for_a_seed(selection: str) -> None:
    policy = JitteryPolicy(steps=4, p=0.4, options=3)

    async def once(seed: int):
        return await MCTS(policy, policy.test_verifier(), k=3, concurrency=4, selection=selection, seed=seed,
                          max_expansions=12, oracle=policy.oracle).run()

    first, second = await once(7), await once(7)
    assert shape(first) == shape(second)
    assert first.stop_reason == second.stop_reason
    assert [c.node_id for c in first.candidates] == [c.node_id for c in second.candidates]
    other = await once(8)
    assert shape(other) != shape(first)


async def test_best_of_n_is_deterministic_for_a_seed() -> None:
    policy = JitteryPolicy(steps=3, p=0.5)
    a = await BestOfN(policy, policy.test_verifier(), n=8, concurrency=8, seed=3).run()
    b = await BestOfN(policy, policy.test_verifier(), n=8, concurrency=8, seed=3).run()
    assert shape(a) == shape(b) and a.best is not None and a.best.node_id == b.best.node_id


async def test_virtual_loss_spreads_one_wave_over_different_leaves() -> None:
    policy = SimulatedPolicy(steps=6, p=0.5)
    search = MCTS(policy, policy.test_verifier(), k=3, concurrency=3, max_expansions=4, widening=0)
    result = await search.run()
    # wave 1 expands the root; wave 2 expands three different children (none twice), so every child of
    # the root has children of its own.
    root_children = [n for n in result.tree if n.parent_id == "0"]
    assert len(root_children) == 3
    assert all(any(m.parent_id == c.node_id for m in result.tree) for c in root_children)


@pytest.mark.parametrize("widening", [0, 2])
async def test_a_stuck_node_is_expanded_again_up_to_the_widening_limit(widening: int) -> None:
    policy = SimulatedPolicy(steps=3, p=0.0)  # every step wrong: no child ever scores above its parent
    result = await MCTS(policy, policy.test_verifier(), k=3, concurrency=1, max_expansions=3,
                        widening=widening).run()
    root_children = [n.node_id for n in result.tree if n.parent_id == "0"]
    if widening:
        assert root_children == [f"0.{i}" for i in range(9)]
    else:
        assert root_children == ["0.0", "0.1", "0.2"] and len(result.tree) == 1 + 9


async def test_widening_makes_mcts_recover_when_all_first_children_are_wrong() -> None:
    policy = SimulatedPolicy(steps=5, p=0.5, options=4)

    async def rate(widening: int) -> float:
        results = await asyncio.gather(*(
            MCTS(policy, policy.test_verifier(), k=3, concurrency=1, widening=widening, seed=s,
                 oracle=policy.oracle).run(budget=Budget(model_calls=60)) for s in range(150)
        ))
        return sum(1 for r in results if r.best is not None and r.best.correct) / 150

    without, with_widening = await rate(0), await rate(2)
    # without widening a node whose k children are all wrong (1/8 per node) is a dead end
    assert without < 0.9 < with_widening


async def test_mcts_stops_on_a_verified_solution() -> None:
    policy = SimulatedPolicy(steps=3, p=0.7)
    result = await MCTS(policy, policy.test_verifier(), k=2, concurrency=2, seed=1).run()
    assert result.stop_reason == "solved"
    assert result.best is not None and result.best.verified and policy.is_correct(result.best.state)


async def test_mcts_stops_on_depth_when_every_branch_reaches_max_depth() -> None:
    policy = SimulatedPolicy(steps=10, p=0.5, options=2)
    result = await MCTS(policy, policy.test_verifier(), k=2, concurrency=2, max_depth=3, widening=0).run()
    assert result.stop_reason == "depth"
    assert max(n.depth for n in result.tree) == 3
    assert len(result.tree) == 1 + 2 + 4 + 8
    assert result.best is None and result.candidates == []


async def test_mcts_tree_is_recorded_in_the_events_file(tmp_path) -> None:
    policy = SimulatedPolicy(steps=4, p=0.5)
    path = tmp_path / "events.jsonl"
    with EventLog(path, run_id="r1") as log:
        result = await MCTS(policy, policy.test_verifier(), k=3, concurrency=2, max_expansions=6).run(events=log)
    from agentflow.events import read_events

    events = list(read_events(path))
    kinds = {e.kind for e in events}
    assert {"search.start", "search.node", "search.end"} <= kinds
    assert all(e.run_id == "r1" for e in events)
    rebuilt = tree_from_events(events)
    assert [(n.node_id, n.parent_id, n.action, n.visits, n.snapshot_id, n.usage) for n in rebuilt] == [
        (n.node_id, n.parent_id, n.action, n.visits, n.snapshot_id, n.usage) for n in result.tree
    ]
    assert [n.value for n in rebuilt] == pytest.approx([n.value for n in result.tree])
    root = next(n for n in rebuilt if n.node_id == "0")
    assert root.visits == sum(1 for n in rebuilt if n.parent_id is not None)
    assert sum(n.usage.model_calls for n in rebuilt) == result.usage.model_calls == 6 * 3
