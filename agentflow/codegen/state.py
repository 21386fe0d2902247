"""The state keys the `codegen.*` node types read and write, with the type of each value (as for
`agentflow.reasoning.state`). The hidden tests of a task are never part of it (`agentflow.codegen.task`).
"""

from __future__ import annotations

from typing import Literal, TypedDict

from agentflow.codegen.execute import ReportSummary
from agentflow.reasoning.state import CodeKeys, PlanKeys, PromptKeys, ScoreRecord, VerifiedKeys


class SimulationRecord(TypedDict):
    """A step-by-step simulation (`codegen.simulate`): of the plan on the examples, or of the code on its first
    failing example."""

    target: Literal["plan", "code"]
    verdict: Literal["agree", "disagree"]
    """Whether the simulation ends as the examples say (a code simulation is run on a failure: `disagree`)."""
    trace: str


class ExamplesRecord(ReportSummary):
    """The prompt's examples on the code (`codegen.test`'s `tests`)."""

    ok: bool
    """No example fails (no examples: nothing left to check, so True)."""


class RewardRecord(ScoreRecord):
    """A candidate's reward (`codegen.reward`): `score` is what a search's `value: score` reads."""

    examples: float | None
    """The share of examples passing (None: the prompt has none)."""
    verifier: float | None
    """The verification agent's score (None: not read)."""


class EntryPointKeys(TypedDict, total=False):
    entry_point: str
    """The function's name (default: the last function the prompt (its signature and docstring, with its
    examples) defines)."""


class PlanRoundKeys(TypedDict, total=False):
    plan_rounds: int
    """Revisions of the plan after a disagreeing simulation."""


class SimulationKeys(TypedDict, total=False):
    simulation: SimulationRecord


class ExampleKeys(TypedDict, total=False):
    tests: ExamplesRecord


class DebugRoundKeys(TypedDict, total=False):
    debug_rounds: int


class CodeScoreKeys(TypedDict, total=False):
    score: RewardRecord


class CodeGenState(PromptKeys, EntryPointKeys, PlanKeys, PlanRoundKeys, SimulationKeys, CodeKeys, ExampleKeys, DebugRoundKeys,
                   VerifiedKeys, CodeScoreKeys, total=False):
    """Every state key of the `codegen.*` node types (a node reads some and returns an update of others)."""


__all__ = ["CodeGenState", "CodeScoreKeys", "DebugRoundKeys", "EntryPointKeys", "ExampleKeys", "ExamplesRecord",
           "PlanRoundKeys", "RewardRecord", "SimulationKeys", "SimulationRecord"]
