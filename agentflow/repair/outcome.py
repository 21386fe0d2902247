"""What a repair produces: a candidate per model answer (candidates.jsonl) and the task's outcome (outcome.json)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from agentflow.budget import BudgetKind, CallTime
from agentflow.events.kinds import RepairStatus
from agentflow.repair.verify.workbench import Verification

CandidateStatus = Literal["ok", "noop", "unparsable", "apply_error"]


class Candidate(BaseModel):
    """One model answer and what came of it: the one record of a candidate, in the repair's state (`attempts`,
    `tried`) and as a row of candidates.jsonl."""

    instance_id: str
    candidate_id: str
    parent_id: str | None
    status: CandidateStatus
    patch: str = ""
    dropped_test_files: list[str] = Field(default_factory=list)
    edit_errors: list[str] = Field(default_factory=list)
    verification: Verification | None = None
    finish_reason: str = ""
    sample: int = 0
    answer: str = ""
    """The model's answer (first 4000 characters)."""
    window: str = ""
    """The code the answer was asked to rewrite, or with SEARCH/REPLACE edits the first window shown
    (`path:Class.method`, or `path:START-END` for lines outside a function); empty for a split-out part."""
    approach: list[str] = Field(default_factory=list)
    """What its prompt changed after earlier answers of its draw changed nothing, in order (`format`: the other
    edit format, `failure`: the failure report shown, `suspect`: another suspect; `rollout.NOOP_ESCALATION`);
    empty for a draw's first try."""
    part_of: str | None = None
    """Set on a candidate that keeps one change of another's multi-change edit (`split_edits`): not a model
    answer of its own, so not a sample."""
    mutant: str = ""
    """Set on a candidate made without a model (`swe.mutants`): the kind of its one change (`flip-comparison`,
    ...). Not a model answer, so not a sample, and no voter."""
    value: float | None = None
    """The value agent's value of it (`swe.value`; not a column of candidates.jsonl, written before it)."""
    assessment: str = ""
    """The value agent's assessment of it (`swe.value`; not in candidates.jsonl either)."""

    @property
    def verified(self) -> Verification:
        """Its verification: every candidate in the state's `attempts` (status `ok`) has one."""
        if self.verification is None:
            raise ValueError(f"candidate {self.candidate_id} was not verified")
        return self.verification


class InstanceOutcome(BaseModel):
    """Result of one task (instances/<id>/outcome.json; its presence marks the task done)."""

    instance_id: str
    status: RepairStatus
    """How the task ended: submitted, limits_exceeded (then `limit` says which), context_exceeded, env_error or
    no_patch (`agentflow.events.kinds.RepairStatus`)."""
    limit: BudgetKind | None = None
    """Which limit of the task's budget was reached when `status` is limits_exceeded (wall_seconds,
    model_calls, tokens, usd, tool_calls); None otherwise."""
    model_patch: str = ""
    chosen: str | None = None
    """candidate_id of the submitted patch."""
    chosen_by: str | None = None
    """What decided the choice: tests, vote, verifier, only (a single candidate), or best_so_far (the task was
    cut at its wall-clock limit before choosing: the best candidate verified so far, ungraded); noop when nothing
    was submitted because every candidate changes no code while the tests fail at the base commit."""
    noop: bool | None = None
    """Whether the submitted patch changes no code (only docstrings, comments or whitespace:
    `swe.patch.changes_nothing`); None when nothing was submitted or it was not checked."""
    base_failed: bool | None = None
    """Whether the verifying tests fail at the base commit, so the bug shows there (`choose.tests_fail_at_base`);
    None when they were not run or cannot tell."""
    verification: Verification | None = None
    report: dict[str, Any] | None = None
    """SWE-bench per-instance report (resolved, tests_status, ...) of the submitted patch."""
    feedback: str = "none"
    reproduced: bool | None = None
    """Blind mode: whether a reproduction script that fails at the base commit was found."""
    plan: str | None = None
    ranked: list[str] = Field(default_factory=list)
    """The coder's ranking of the suspects (`path:function`, most likely first; empty without `rank`)."""
    suspects: list[str] = Field(default_factory=list)
    """The code windows the search's edits look at (`path:Class.method`), in order, as at its start."""
    candidates: int = 0
    samples: int = 0
    usage: dict[str, Any] = Field(default_factory=dict)
    call_time: CallTime = Field(default_factory=CallTime)
    """Its model calls that reached a model and their seconds: the run's next tasks plan their test time at
    their pace until they have made calls of their own (`repair.verify.testshare.WallPlan`)."""
    error: str | None = None
    duration_s: float = 0.0
    graph_s: float = 0.0
    """Wall time of the task's workflow run (its nodes plus the graph engine and checkpointer around them)."""
    nodes_s: float = 0.0
    """Time inside the workflow's nodes; graph_s - nodes_s is what the graph engine and checkpointer cost."""
    test_seconds: float = 0.0
    """Seconds of test runs on candidates (the base commit's runs not counted)."""
    longest_test_wait_s: float = 0.0
    """The longest single test run on a candidate."""
    base_test_seconds: float | None = None
    """How long the verifying tests took on the unchanged code (what a whole-suite run costs)."""
    preflight: dict[str, Any] | None = None
    """Blind mode: what the test command did at the base commit before any model call (`swe.preflight`)."""
    sandbox_backend: str | None = None
    """The sandbox backend the task actually ran in (docker, or local when asked for by name)."""

    @model_validator(mode="before")
    @classmethod
    def _old_status_spelling(cls, data: Any) -> Any:
        """Outcomes written before `limit` was a field of its own spelled it after the status
        (`limits_exceeded:wall_seconds`): read as the status and its limit."""
        if isinstance(data, dict) and isinstance(data.get("status"), str) and ":" in data["status"]:
            status, _, limit = data["status"].partition(":")
            data = {**data, "status": status, "limit": data.get("limit") or limit}
        return data

    def limits_exceeded(self, limit: BudgetKind) -> None:
        """The task was stopped by its budget's `limit`."""
        self.status, self.limit = RepairStatus.LIMITS_EXCEEDED, limit

    @property
    def infra_failure(self) -> bool:
        return self.status is RepairStatus.ENV_ERROR
