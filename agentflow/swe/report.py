"""Evaluation reports with SWE-bench's field names.

Per instance (as SWE-bench's `get_eval_report`): `patch_is_None`, `patch_exists`,
`patch_successfully_applied`, `resolved`, `tests_status` ({FAIL_TO_PASS, PASS_TO_PASS} x {success,
failure}); agentflow adds `error`, `flaky_tests`, `duration_s`. The summary uses the names of SWE-bench's
`make_run_report` (`total_instances`, ..., `error_ids`, `schema_version`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from agentflow.swe.tasks import Prediction, SWETask

SCHEMA_VERSION = 2

GradeOutcome = Literal["empty_patch", "error", "resolved", "unresolved"]
"""How a graded prediction came out (`InstanceReport.outcome`): SWE-bench's summary lists of ids."""


def empty_tests_status() -> dict[str, dict[str, list[str]]]:
    return {"FAIL_TO_PASS": {"success": [], "failure": []}, "PASS_TO_PASS": {"success": [], "failure": []}}


class InstanceReport(BaseModel):
    """Outcome of one prediction on one task (SWE-bench's per-instance report, plus a few extras)."""

    instance_id: str = Field(exclude=True)
    model_name_or_path: str = Field(default="", exclude=True)
    patch_is_None: bool = False
    patch_exists: bool = False
    patch_successfully_applied: bool = False
    resolved: bool = False
    tests_status: dict[str, dict[str, list[str]]] = Field(default_factory=empty_tests_status)
    completed: bool = Field(default=False, exclude=True)
    """The tests ran to the end (False for empty patches and errors)."""
    error: str | None = None
    """Why the instance could not be evaluated (patch did not apply, sandbox failed, ...)."""
    flaky_tests: list[str] = Field(default_factory=list)
    """Tests that failed, then passed when run again (grading keeps the first run)."""
    restored_files: list[str] = Field(default_factory=list)
    """Files the model patch touched that are not library source, put back as at the base commit (removed
    when it has none) before the tests ran (`conftest.py`, any configuration, tests, new top-level modules,
    `-p` plugin modules, ...: see `swe/guard.py`)."""
    duration_s: float = 0.0

    @property
    def empty_patch(self) -> bool:
        return not self.patch_exists

    @property
    def outcome(self) -> GradeOutcome:
        if self.empty_patch:
            return "empty_patch"
        if not self.completed:
            return "error"
        return "resolved" if self.resolved else "unresolved"


def grade(
    fail_to_pass: Sequence[str], pass_to_pass: Sequence[str], status: Mapping[str, str]
) -> tuple[dict[str, dict[str, list[str]]], bool]:
    """SWE-bench's grading, stricter on FAIL_TO_PASS: those tests must pass (skipped or xfailed is not
    passed), PASS_TO_PASS tests must pass, xfail or be skipped; resolved when every one does. Tests that did
    not run count as failures."""
    from agentflow.swe.testrun import maintained, passed

    out = empty_tests_status()
    for test_id in fail_to_pass:
        out["FAIL_TO_PASS"]["success" if passed(test_id, status) else "failure"].append(test_id)
    for test_id in pass_to_pass:
        out["PASS_TO_PASS"]["success" if maintained(test_id, status) else "failure"].append(test_id)
    resolved = not out["FAIL_TO_PASS"]["failure"] and not out["PASS_TO_PASS"]["failure"]
    return out, resolved


def make_summary(
    tasks: Sequence[SWETask], predictions: Sequence[Prediction], reports: Sequence[InstanceReport]
) -> dict[str, Any]:
    """The run summary with SWE-bench's field names."""
    predicted = {p.instance_id for p in predictions}
    by_id = {r.instance_id: r for r in reports}
    ids: dict[GradeOutcome | Literal["completed", "incomplete"], list[str]] = {
        k: [] for k in ("completed", "incomplete", "empty_patch", "resolved", "unresolved", "error")}
    for task in tasks:
        iid = task.instance_id
        report = by_id.get(iid)
        if iid not in predicted or report is None:
            ids["incomplete"].append(iid)
            continue
        if report.outcome in ("resolved", "unresolved"):
            ids["completed"].append(iid)
        ids[report.outcome].append(iid)
    return {
        "total_instances": len(tasks),
        "submitted_instances": len(predictions),
        **{f"{k}_instances": len(ids[k]) for k in ("completed", "resolved", "unresolved", "empty_patch",
                                                    "error")},
        **{f"{k}_ids": sorted(ids[k]) for k in ("completed", "incomplete", "empty_patch")},
        "submitted_ids": sorted(predicted),
        **{f"{k}_ids": sorted(ids[k]) for k in ("resolved", "unresolved", "error")},
        "schema_version": SCHEMA_VERSION,
    }


def instance_report_json(report: InstanceReport) -> dict[str, Any]:
    """`{instance_id: {...}}`, the shape of SWE-bench's per-instance report.json."""
    return {report.instance_id: report.model_dump(mode="json")}


def format_summary(summary: Mapping[str, Any]) -> str:
    """Human-readable summary lines."""
    total, resolved = summary["total_instances"], summary["resolved_instances"]
    rate = f" ({100 * resolved / total:.1f}%)" if total else ""
    kinds = ("total", "submitted", "completed", "resolved", "unresolved", "empty_patch", "error")
    return "\n".join(f"{kind.replace('_', ' ') + ' instances:':<23}{summary[f'{kind}_instances']}"
                     + (rate if kind == "resolved" else "") for kind in kinds)
