"""The inference algorithms PlanGEN chooses among, over any task kind's `Generator`.

    best_of_n        n complete candidates, each scored; the best one
    tree_of_thought  k plans (first thoughts), each scored; the best `keep` are completed and scored
    rebase           n plans scored; n completions shared out by softmax(score / T) (REBASE, Wu et al. 2024:
                     reward-balanced expansion), the best completion

A task kind supplies the generator (how to sketch a plan, complete one, and score plans and candidates);
scores are rewards in [0, 1]. A score of `stop_at` or more ends the search at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol


class Generator(Protocol):
    async def plan(self, seed: int) -> str:
        """A first thought: an approach sketch, not yet a solution."""
        ...

    async def complete(self, plan: str | None, seed: int) -> str:
        """A full candidate following `plan` (or none)."""
        ...

    async def score_plan(self, plan: str) -> float:
        """How promising a plan is, in [0, 1]."""
        ...

    async def score(self, candidate: str) -> float:
        """The candidate's reward, in [0, 1]."""
        ...


@dataclass
class Tried:
    candidate: str
    reward: float
    plan: str | None = None


@dataclass
class SearchOutcome:
    algorithm: str
    tried: list[Tried] = field(default_factory=list)
    plans: list[tuple[str, float]] = field(default_factory=list)
    """(plan, its score) for the algorithms that plan first."""

    @property
    def best(self) -> Tried | None:
        return max(self.tried, key=lambda t: t.reward) if self.tried else None


async def best_of_n(gen: Generator, n: int = 3, *, stop_at: float = 1.0) -> SearchOutcome:
    out = SearchOutcome("best_of_n")
    for i in range(n):
        cand = await gen.complete(None, seed=i)
        out.tried.append(Tried(cand, await gen.score(cand)))
        if out.tried[-1].reward >= stop_at:
            break
    return out


async def _scored_plans(gen: Generator, k: int) -> list[tuple[str, float]]:
    plans = []
    for i in range(k):
        plan = await gen.plan(seed=i)
        plans.append((plan, await gen.score_plan(plan)))
    return plans


async def tree_of_thought(gen: Generator, k: int = 3, keep: int = 2, *, stop_at: float = 1.0) -> SearchOutcome:
    out = SearchOutcome("tree_of_thought", plans=await _scored_plans(gen, k))
    ranked = sorted(out.plans, key=lambda p: -p[1])[:keep]
    for i, (plan, _) in enumerate(ranked):
        cand = await gen.complete(plan, seed=i)
        out.tried.append(Tried(cand, await gen.score(cand), plan))
        if out.tried[-1].reward >= stop_at:
            break
    return out


def share_out(scores: list[float], n: int, temperature: float = 0.2) -> list[int]:
    """n expansions shared among nodes in proportion to softmax(score / T), rounded by largest remainder."""
    if not scores:
        return []
    top = max(scores)
    weights = [math.exp((s - top) / max(temperature, 1e-6)) for s in scores]
    total = sum(weights)
    exact = [n * w / total for w in weights]
    counts = [math.floor(x) for x in exact]
    order = sorted(range(len(scores)), key=lambda i: -(exact[i] - counts[i]))
    for i in order[: n - sum(counts)]:
        counts[i] += 1
    return counts


async def rebase(gen: Generator, n: int = 3, *, temperature: float = 0.2, stop_at: float = 1.0) -> SearchOutcome:
    out = SearchOutcome("rebase", plans=await _scored_plans(gen, n))
    seed = 0
    for (plan, _), count in zip(out.plans, share_out([s for _, s in out.plans], n, temperature), strict=True):
        for _ in range(count):
            cand = await gen.complete(plan, seed=seed)
            seed += 1
            out.tried.append(Tried(cand, await gen.score(cand), plan))
            if out.tried[-1].reward >= stop_at:
                return out
    return out


async def run_algorithm(name: str, gen: Generator, n: int = 3, *, stop_at: float = 1.0) -> SearchOutcome:
    """Run the algorithm called `name` with breadth `n`."""
    if name == "best_of_n":
        return await best_of_n(gen, n, stop_at=stop_at)
    if name == "tree_of_thought":
        return await tree_of_thought(gen, n, keep=max(1, n - 1), stop_at=stop_at)
    if name == "rebase":
        return await rebase(gen, n, stop_at=stop_at)
    raise ValueError(f"unknown inference algorithm {name!r} (best_of_n, tree_of_thought, rebase)")


__all__ = ["Generator", "SearchOutcome", "Tried", "best_of_n", "rebase", "run_algorithm", "share_out",
           "tree_of_thought"]
