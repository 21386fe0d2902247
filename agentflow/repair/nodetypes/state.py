"""The state of a repair workflow: every key the repair node types read and write, with the type of its value
(plain data, so a checkpoint after each node holds all of it; the checkpoint's serializer builds back exactly
the types named here: `agentflow.graph.persist.serde`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from agentflow.graph.persist.checkpoint import newest_per_thread
from agentflow.reasoning.state import PlanKeys
from agentflow.repair.outcome import Candidate
from agentflow.repair.verify.workbench import Verification

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver


class HeadRecord(TypedDict):
    """What a chain's next edit builds on (`candidate`): a verified candidate (at first the unchanged code, the
    base verification's) and what the next edit is told of it."""

    built_on: Candidate
    feedback: str
    """The tests' output, a reviewer's notes: what the next edit's prompt shows."""
    value: float
    """What the search values the branch by."""


class EditRecord(TypedDict):
    """An edit sample `swe.edit` drew and read, not yet written (`edit`); `swe.test` verifies it."""

    candidate_id: str
    parent_id: str
    sample: int
    files: dict[str, str]
    """Path -> its new content."""
    errors: list[str]
    answer: str
    finish: str
    window: str
    """The suspect the sample rewrote first (`focus.window_key`)."""
    approach: list[str]
    """What its prompt changed after noops of its draw (`Candidate.approach`)."""


class FocusRecord(TypedDict):
    """Which suspects a chain's samples looked at and which the model left alone (`focus.FocusSchedule`)."""

    shown: dict[str, int]
    declined: dict[str, int]
    filled: NotRequired[list[str]]
    """The statements (`infill.Hole.key`) the chain's fills filled: a later draw fills others first."""


class ReproductionRecord(TypedDict, total=False):
    """Blind mode's reproduction (`swe.reproduce`): a script, or the failing tests a failing-test report names;
    and the keep-working check beside a script."""

    kept: bool | None
    """True: it fails while the bug is present and verifies candidates; None: none was tried."""
    script: str
    tests: list[str]
    """The report's failing tests (pytest node ids) kept as the reproduction, instead of a script."""
    keep_check: str | None


class RegressionRecord(TypedDict, total=False):
    """The selected regression tests (`swe.regression`)."""

    selected: bool
    passing: int
    deselected: list[str]
    test_cmd: str
    """The test command that verifies candidates from then on."""


class LocalizedRecord(TypedDict):
    """What the model's localization chose (`swe.localize`), each as `path:name`."""

    files: list[str]
    symbols: list[str]
    locations: list[str]


class GeneratedTest(TypedDict):
    """A test script a trajectory wrote (`swe.trajectory`); `swe.vote_tests` runs it on every candidate."""

    candidate_id: str
    script: str


class ChosenRecord(TypedDict):
    """The submitted candidate (`chosen`)."""

    candidate_id: str
    patch: str
    chosen_by: str | None
    """What decided (`tests`, `vote`, `discriminator`, ...)."""
    noop: bool | None
    """It changes no code."""


class FinalRecord(TypedDict, total=False):
    """The chosen candidate's final verification and report, or why nothing was submitted (`final`)."""

    verification: Verification
    report: dict[str, Any]
    """The task's `InstanceReport` as JSON."""
    declined: str


Verdict = Literal["pass", "retry", "stop"]
"""After `swe.test`: the tests passed, another attempt follows, or the chain stops."""


# The state's keys in groups, each key typed once: a node type's `reads` and `writes` are made of them
# (`agentflow.repair.nodes`), so a group holds keys only ever written together.


class TaskKeys(TypedDict, total=False):
    issue: str


class BaseKeys(TypedDict, total=False):
    base: Verification
    """The tests on the unchanged code (`swe.baseline`, again after a kept reproduction or selected tests)."""


class SpectrumKeys(TypedDict, total=False):
    spectrum: dict[str, Any]
    """The call-traced runs' summary (`spectrum.gather_evidence`; empty when off)."""


class RankedKeys(TypedDict, total=False):
    ranked: list[list[str]]
    """Suspect functions, most suspect first, each `[path, qualified name]`."""


class LocalizedKeys(TypedDict, total=False):
    localized: LocalizedRecord


class ReproductionKeys(TypedDict, total=False):
    reproduction: ReproductionRecord


class RegressionKeys(TypedDict, total=False):
    regression: RegressionRecord


class VerifyKeys(BaseKeys, RegressionKeys, ReproductionKeys, SpectrumKeys, total=False):
    """What `nodekit.how_to_verify` reads: every node type that verifies reads these."""


class EditKeys(TypedDict, total=False):
    edit: EditRecord | None


class DrawnKeys(TypedDict, total=False):
    drawn: list[int]
    """The numbers of every sample drawn (resampled answers included)."""


class DrawKeys(DrawnKeys, total=False):
    focus: FocusRecord
    suspects: list[str]
    """The code windows (`path:name`) the first edit looked at."""


class ResampledKeys(TypedDict, total=False):
    resampled: list[Candidate]
    """Every answer of the branch that changed nothing or could not be read (status `noop`, `unparsable`,
    `apply_error`: drawn again); the search gathers every branch's."""


class CandidateKeys(TypedDict, total=False):
    candidate: HeadRecord


class TriedKeys(TypedDict, total=False):
    tried: Candidate | None
    """The attempt `swe.test` verified last (the critic and the value agent look at it)."""
    tries: int
    verdict: Verdict


class SearchValueKeys(TypedDict, total=False):
    value: float
    """A branch's search value."""


class AttemptsKeys(TypedDict, total=False):
    attempts: list[Candidate]
    """Every verified candidate (status `ok`) of the branch; the search gathers every branch's."""


class TrajectoryKeys(TypedDict, total=False):
    tests: list[GeneratedTest]
    """The trajectories' last test scripts (a search over `swe.trajectory` branches gathers them)."""
    trajectory_runs: list[dict[str, Any]]
    """Each trajectory's record: its number, script, turns and why it stopped (`done`, `turns`, an error)."""


class ChoiceKeys(TypedDict, total=False):
    chosen: ChosenRecord | None
    final: FinalRecord


def task_candidates(*states: Mapping[str, Any]) -> list[Candidate]:
    """The task's candidates, the one record of them: every one in `states`' `attempts` and `resampled` (the
    workflow's and its search branches'), each id once, in the order drawn."""
    by_id: dict[str, Candidate] = {}
    for state in states:
        for cand in [*(state.get("attempts") or []), *(state.get("resampled") or [])]:
            by_id.setdefault(cand.candidate_id, cand)
    return sorted(by_id.values(), key=lambda c: (c.sample, c.candidate_id))


async def checkpointed_candidates(saver: BaseCheckpointSaver[Any]) -> list[Candidate]:
    """The task's candidates as the latest checkpoint of each of its threads holds them: the workflow's and
    every search branch's, so a search a limit cut before it gathered its branches still counts theirs."""
    return task_candidates(*(saved.checkpoint["channel_values"] for saved in await newest_per_thread(saver)))


def solved(candidates: list[Candidate]) -> bool:
    """One of `candidates` passed tests that decide."""
    return any(c.status == "ok" and c.verified.passed is True for c in candidates)


class RepairState(TaskKeys, VerifyKeys, RankedKeys, LocalizedKeys, PlanKeys, EditKeys, DrawKeys, ResampledKeys,
                  CandidateKeys, TriedKeys, SearchValueKeys, AttemptsKeys, TrajectoryKeys, ChoiceKeys,
                  total=False):
    """Every state key of the repair's node types (a node reads some and returns an update of others)."""


__all__ = ["AttemptsKeys", "BaseKeys", "CandidateKeys", "ChoiceKeys", "ChosenRecord", "DrawKeys", "DrawnKeys", "EditKeys",
           "EditRecord", "FinalRecord", "FocusRecord", "GeneratedTest", "HeadRecord", "LocalizedKeys",
           "LocalizedRecord", "RankedKeys", "RegressionKeys", "RegressionRecord", "RepairState", "ReproductionKeys",
           "ReproductionRecord", "ResampledKeys", "SearchValueKeys", "SpectrumKeys", "TaskKeys", "TrajectoryKeys", "TriedKeys",
           "Verdict", "VerifyKeys", "checkpointed_candidates", "solved", "task_candidates"]
