"""Selection among candidates, and the coverage / pass@k report shared by every strategy."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

from agentflow.search.passk import pass_at_ks
from agentflow.search.types import Candidate
from agentflow.swe.normalize import normalise_output

Selection = Literal["score", "tests", "vote", "tests_then_critic"]
Oracle = Callable[[Candidate], "bool | Awaitable[bool]"]


def _tests_fraction(c: Candidate) -> float:
    v = c.verification
    if v is None or not v.tests:
        return 0.0
    counted = [o for o in v.tests.values() if o != "skipped"]
    return v.tests_passed / len(counted) if counted else 0.0


def select(candidates: Sequence[Candidate], how: Selection = "score") -> Candidate | None:
    """The selected candidate; ties go to the earliest. Verified candidates (passed=True) always come first
    except in `vote`, which picks the largest cluster of equal normalised outputs."""
    if not candidates:
        return None
    if how == "vote":
        clusters: dict[str, list[Candidate]] = {}
        for c in candidates:
            clusters.setdefault(normalise_output(c.output, c.state.files), []).append(c)
        biggest = max(clusters.values(), key=len)  # max keeps the first of equal sizes
        return max(biggest, key=lambda c: c.score)

    def key(c: Candidate) -> tuple[float, ...]:
        v = c.verification
        passed = 1.0 if c.verified else 0.0
        if how == "score":
            return (passed, c.score)
        if how == "tests":
            return (passed, _tests_fraction(c))
        critic = v.critic_score if v is not None and v.critic_score is not None else 0.0
        return (passed, _tests_fraction(c), critic)

    return max(candidates, key=key)


async def judge(candidates: Sequence[Candidate], oracle: Oracle | None) -> None:
    """Fill `candidate.correct` from the oracle (ground truth, used only for the report)."""
    if oracle is None:
        return
    for c in candidates:
        value = oracle(c)
        if inspect.isawaitable(value):
            value = await value
        c.correct = bool(value)


def coverage_and_pass_at_k(
    candidates: Sequence[Candidate], samples: int, oracle_known: bool = False
) -> tuple[bool | None, dict[int, float]]:
    """Coverage (any candidate correct) and pass@k over `samples` attempts. Correctness is the oracle's when
    known, else the verifier's `passed` when it decided every candidate; otherwise both are unknown."""
    if candidates and all(c.correct is not None for c in candidates):
        correct = [bool(c.correct) for c in candidates]
    elif candidates and all(c.verification is not None and c.verification.passed is not None for c in candidates):
        correct = [c.verified for c in candidates]
    elif not candidates and oracle_known:
        return False, pass_at_ks(samples, 0)
    else:
        return None, {}
    c = sum(correct)
    return c > 0, pass_at_ks(max(samples, len(candidates)), c)
