"""The state keys the `instruct.*` node types read and write, with the type of each value (as for
`agentflow.reasoning.state`); the critic's check functions are kept as their source text.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from agentflow.reasoning.state import ConstraintKeys, PlanKeys, PromptKeys, ResponseKeys, ScoreRecord


class ConstraintVerdict(TypedDict):
    """The critic's verdict on one constraint of an answer."""

    constraint: str
    ok: bool
    how: Literal["code", "model"]
    """Checked by a function the critic wrote (run in the sandbox), or judged by the model."""
    why: str
    """What is wrong ('' when it holds)."""


class BestRecord(TypedDict):
    """The answer that met most constraints so far (`instruct.critic`): a worse refinement gives way to it."""

    response: str
    passed: int
    critique: list[ConstraintVerdict]


class ConstraintScore(ScoreRecord):
    """An answer's reward (`instruct.score`): `score` is what a search's `value: score` reads."""

    failed: NotRequired[list[str]]
    """The constraints that do not hold (only when each was checked: the verification agent's single score
    names none)."""


CheckCode = str | None
"""What `checks` keeps for a constraint: the critic's check function (source text), `""` when the critic said
code cannot check it (judged by the model every round), None when no check that runs was kept (ask again)."""


class CritiqueKeys(TypedDict, total=False):
    critique: list[ConstraintVerdict]
    all_pass: bool


class CheckKeys(TypedDict, total=False):
    checks: dict[str, CheckCode]
    """Constraint -> its check."""


class BestKeys(TypedDict, total=False):
    best: BestRecord


class RefinementKeys(TypedDict, total=False):
    refinements: list[str]
    """New answers for the critic to choose among (emptied once it chose)."""


class RoundKeys(TypedDict, total=False):
    rounds: int
    """Refinement rounds so far."""


class AnswerScoreKeys(TypedDict, total=False):
    score: ConstraintScore


class InstructState(PromptKeys, ConstraintKeys, PlanKeys, ResponseKeys, CritiqueKeys, CheckKeys, BestKeys,
                    RefinementKeys, RoundKeys, AnswerScoreKeys, total=False):
    """Every state key of the `instruct.*` node types (a node reads some and returns an update of others)."""


__all__ = ["AnswerScoreKeys", "BestKeys", "BestRecord", "CheckCode", "CheckKeys", "ConstraintScore",
           "ConstraintVerdict", "CritiqueKeys", "InstructState", "RefinementKeys", "RoundKeys"]
