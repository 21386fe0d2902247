"""The state keys the `reason.*` node types read and write, with the type of each value.

`ReasoningState` is the `state` of these node types (`NodeType.state`), so a workflow that does not declare a
key under `state:` gets it typed as here. Every value is plain JSON (a checkpoint holds it); a key a setting
renames holds the same record under the new name. The task kinds' score records build on `ScoreRecord`, so a
search's `value: score` reads `score` whichever node wrote it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict


class ScoreRecord(TypedDict):
    """A 0..1 score of a plan, code or an answer (`reason.verify`'s `verified`; what a search's `value:` reads)."""

    score: float


class ValueRecord(TypedDict):
    """The value agent's judgement of an attempt (`reason.value`)."""

    value: float | None
    """0..1; None when its answer named no number."""
    assessment: str


class ArmRecord(TypedDict):
    """One algorithm's rewards so far (`ucb.ArmStats` as JSON)."""

    n: int
    total: float


class UcbRecord(TypedDict):
    """The rewards per algorithm across instances (`ucb.UcbStats` as JSON): carried from one run's result to
    the next run's input."""

    arms: dict[str, ArmRecord]


class SelectionRecord(TypedDict):
    """Why `reason.select` chose its algorithm."""

    algorithm: str
    prior: str | None
    """The model's pick (None: not asked, or no letter in its answer)."""
    scores: dict[str, float | None]
    """Each algorithm's UCB score (None: not tried yet, infinite)."""


# The keys in groups, each key typed once, of which node types' `reads` and `writes` are made (a group holds
# keys only ever written together); the task kinds' states share the groups of the keys they have in common.


class PromptKeys(TypedDict, total=False):
    prompt: str
    """The instance's text (the task)."""


class ConstraintKeys(TypedDict, total=False):
    constraints: list[str]
    """The task's constraints, as the decomposition (`reason.constraints`) listed them."""


class PlanKeys(TypedDict, total=False):
    """A plan or an outline the task kinds write (`codegen.plan`, `instruct.outline`): not a key of
    `ReasoningState`; the task kinds' states share its type."""

    plan: str


class AlgorithmKeys(TypedDict, total=False):
    algorithm: str
    """The inference algorithm chosen: a graph search's strategy (`strategy_key: algorithm`)."""
    selection: SelectionRecord


class UcbKeys(TypedDict, total=False):
    ucb: UcbRecord


class ResponseKeys(TypedDict, total=False):
    response: str
    """An answer to verify."""


class VerifiedKeys(TypedDict, total=False):
    verified: ScoreRecord


class RewardKeys(TypedDict, total=False):
    reward: float
    """The reward added to the chosen algorithm's statistics (`reason.reward`)."""


class CodeKeys(TypedDict, total=False):
    code: str
    """An attempt the value agent judges (`reason.value`'s default `work`)."""


class TestKeys(TypedDict, total=False):
    tests: Mapping[str, object]
    """What checking the attempt showed (a task kind's test results, `reason.value`'s default `checks`)."""


class ValueKeys(TypedDict, total=False):
    value: ValueRecord


class ReasoningState(PromptKeys, ConstraintKeys, AlgorithmKeys, UcbKeys, ResponseKeys, VerifiedKeys, RewardKeys,
                     CodeKeys, TestKeys, ValueKeys, total=False):
    """Every state key of the `reason.*` node types (a node reads some and returns an update of others)."""


__all__ = ["AlgorithmKeys", "ArmRecord", "CodeKeys", "ConstraintKeys", "PlanKeys", "PromptKeys", "ReasoningState",
           "ResponseKeys", "RewardKeys", "ScoreRecord", "SelectionRecord", "TestKeys", "UcbKeys", "UcbRecord",
           "ValueKeys", "ValueRecord", "VerifiedKeys"]
