"""PlanGEN's selection agent: which inference algorithm to run on an instance.

Each algorithm keeps the rewards it earned on earlier instances (`UcbStats`, carried from instance to
instance in the workflow state). The choice maximises

    mean reward + c * sqrt(2 ln N / n_a) + prior_weight * [a is the model's pick for this instance]

with untried algorithms first (in the order given), as in PlanGEN's modified UCB (Parmar et al., 2025,
section 3.3: historical rewards, an exploration term, and the LLM's judgement of the instance's complexity).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

ALGORITHMS = ("best_of_n", "tree_of_thought", "rebase")
"""The paper's three, chosen among by default: each names a graph search strategy (tree_of_thought: beam)."""
KNOWN_ALGORITHMS = (*ALGORITHMS, "mcts")
"""What a selection may also be given to choose among."""


class ArmStats(BaseModel):
    """What one algorithm has earned so far."""

    n: int = 0
    """Instances it ran on."""
    total: float = 0.0
    """Sum of its rewards (each in [0, 1])."""

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else 0.0


class UcbStats(BaseModel):
    """Rewards per algorithm across instances."""

    arms: dict[str, ArmStats] = Field(default_factory=dict)

    def update(self, algorithm: str, reward: float) -> UcbStats:
        """A copy with `reward` (clipped to [0, 1]) added to `algorithm`."""
        arms = {k: v.model_copy() for k, v in self.arms.items()}
        arm = arms.setdefault(algorithm, ArmStats())
        arm.n += 1
        arm.total += min(max(reward, 0.0), 1.0)
        return UcbStats(arms=arms)


def ucb_scores(stats: UcbStats, algorithms: tuple[str, ...] | list[str], *, c: float = 1.0,
               prior: str | None = None, prior_weight: float = 0.2) -> dict[str, float]:
    """Each algorithm's UCB score (infinite for one not tried yet)."""
    arms = [(a, stats.arms.get(a, ArmStats())) for a in algorithms]
    total = sum(arm.n for _, arm in arms)
    return {a: math.inf if arm.n == 0 else arm.mean + c * math.sqrt(2 * math.log(max(total, 1)) / arm.n)
            + (prior_weight if a == prior else 0.0) for a, arm in arms}


def choose_algorithm(stats: UcbStats, algorithms: tuple[str, ...] | list[str], *, c: float = 1.0,
                     prior: str | None = None, prior_weight: float = 0.2) -> str:
    """The algorithm to run: an untried one first (the model's pick among them, else the first), else the
    highest UCB score (ties: the earlier in `algorithms`)."""
    scores = ucb_scores(stats, algorithms, c=c, prior=prior, prior_weight=prior_weight)
    untried = [a for a in algorithms if math.isinf(scores[a])]
    if untried:
        return prior if prior in untried else untried[0]
    return max(algorithms, key=lambda a: (scores[a], -list(algorithms).index(a)))


__all__ = ["ALGORITHMS", "KNOWN_ALGORITHMS", "ArmStats", "UcbStats", "choose_algorithm", "ucb_scores"]
