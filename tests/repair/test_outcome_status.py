"""A task's status is a `RepairStatus` and the limit that stopped it a field of its own (`limit`): every limit
kind comes back as written from outcome.json, from the task's `repair.end` event and from the batch's
report.json; an outcome.json of an earlier version, with the limit spelled in the status, loads the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agentflow.budget import BUDGET_KINDS, BudgetKind
from agentflow.events import EventLog, read_events
from agentflow.events.kinds import RepairEnd, RepairStatus
from agentflow.repair.config import RepairConfig
from agentflow.repair.outcome import InstanceOutcome
from agentflow.repair.run.runs import instance_dir, read_outcome, write_summaries
from agentflow.swe.tasks import SWETask


def _task(iid: str) -> SWETask:
    return SWETask(instance_id=iid, repo="repo", base_commit="abcd", FAIL_TO_PASS=[], PASS_TO_PASS=[])


def _write(out: Path, iid: str, data: dict[str, Any]) -> Path:
    path = instance_dir(out, iid) / "outcome.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data, indent=2))
    return path


@pytest.mark.parametrize("kind", BUDGET_KINDS)
class TestEveryLimitKind:
    def test_outcome_json(self, kind: BudgetKind, tmp_path: Path) -> None:
        outcome = InstanceOutcome(instance_id="t-1", status=RepairStatus.NO_PATCH)
        outcome.limits_exceeded(kind)
        data = outcome.model_dump(mode="json")
        assert (data["status"], data["limit"]) == ("limits_exceeded", kind)  # what a user reads
        loaded = read_outcome(_write(tmp_path, "t-1", data))
        assert loaded is not None and (loaded.status, loaded.limit) == (RepairStatus.LIMITS_EXCEEDED, kind)

    def test_repair_end_event(self, kind: BudgetKind, tmp_path: Path) -> None:
        with EventLog(tmp_path / "events.jsonl") as log:
            log.write(RepairEnd(node_id="t-1", instance_id="t-1", status=RepairStatus.LIMITS_EXCEEDED, limit=kind))
        (end,) = read_events(tmp_path / "events.jsonl")
        assert isinstance(end, RepairEnd) and (end.status, end.limit) == (RepairStatus.LIMITS_EXCEEDED, kind)

    def test_bench_report(self, kind: BudgetKind, tmp_path: Path) -> None:
        stopped = InstanceOutcome(instance_id="t-1", status=RepairStatus.LIMITS_EXCEEDED, limit=kind)
        done = InstanceOutcome(instance_id="t-2", status=RepairStatus.SUBMITTED, model_patch="diff")
        for outcome in (stopped, done):
            _write(tmp_path, outcome.instance_id, outcome.model_dump(mode="json"))
        write_summaries(tmp_path, [_task("t-1"), _task("t-2")], RepairConfig())
        report = json.loads((tmp_path / "report.json").read_text())
        assert {iid: (e["status"], e["limit"]) for iid, e in report["instances"].items()} == {
            "t-1": ("limits_exceeded", kind), "t-2": ("submitted", None)}
        assert report["statuses"] == {"limits_exceeded": 1, "submitted": 1}
        assert report["limits"] == {kind: 1}

    def test_an_outcome_of_an_earlier_version_loads(self, kind: BudgetKind, tmp_path: Path) -> None:
        old = {"instance_id": "t-1", "status": f"limits_exceeded:{kind}", "error": "budget exceeded"}
        loaded = read_outcome(_write(tmp_path, "t-1", old))
        assert loaded is not None and (loaded.status, loaded.limit) == (RepairStatus.LIMITS_EXCEEDED, kind)
        write_summaries(tmp_path, [_task("t-1")], RepairConfig())
        entry = json.loads((tmp_path / "report.json").read_text())["instances"]["t-1"]
        assert (entry["status"], entry["limit"]) == ("limits_exceeded", kind)


@pytest.mark.parametrize("status", [s for s in RepairStatus if s is not RepairStatus.INTERRUPTED])
def test_other_statuses_have_no_limit(status: RepairStatus) -> None:
    loaded = InstanceOutcome.model_validate_json(json.dumps({"instance_id": "t", "status": str(status)}))
    assert (loaded.status, loaded.limit) == (status, None)


@pytest.mark.parametrize("status", ["finished", "limits_exceeded:coffee"])
def test_an_unknown_status_or_limit_is_refused(status: str) -> None:
    with pytest.raises(ValidationError):
        InstanceOutcome.model_validate({"instance_id": "t", "status": status})
