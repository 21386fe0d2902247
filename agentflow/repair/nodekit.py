"""What the repair node types share: the task's runtime from a node's context, events, the search's attempts
as the state holds them, and submitting a choice (graded with the task's tests for the report) or nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentflow.errors import UserError
from agentflow.repair.choose import is_noop, leave_out_noops, noop_check
from agentflow.repair.outcome import Attempt
from agentflow.repair.progress import verdict
from agentflow.repair.runtime import RepairRuntime
from agentflow.repair.workbench import Verification
from agentflow.swe.report import InstanceReport


def runtime(ctx: Any) -> RepairRuntime:
    """The task's `RepairRuntime`; a UserError when the node runs outside a repair."""
    found = ctx.run.resources.get("repair")
    if not isinstance(found, RepairRuntime):
        raise UserError(
            f"node '{ctx.node}' is a repair step and runs only inside a repair",
            hint="run it with 'agentflow repair --workflow FILE' or 'agentflow bench --workflow FILE'",
        )
    return found


def emit(rt: RepairRuntime, kind: str, **data: Any) -> None:
    rt.events.emit(kind, node_id=rt.iid, instance_id=rt.iid, **data)


def attempts_of(state: Any) -> list[Attempt]:
    """The search's candidates as the state holds them (`attempts`)."""
    return [Attempt(a["candidate_id"], a["patch"], Verification.model_validate(a["verification"]), a["sample"],
                    a.get("part_of")) for a in state.get("attempts") or []]


async def submit(rt: RepairRuntime, best: Attempt, chosen_by: str | None, *, among: int | None = None,
                 noops: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """The state update of a chosen candidate: the choice (a `repair.choice` event: which one of `among`
    candidates, what decided, its verification in words, whether it changes no code: `noop`, as `noops` from
    `choose.noop_check` says or checked now), and its final verification and report."""
    noop = await is_noop(rt.bench, best.patch, noops)
    emit(rt, "repair.choice", candidate_id=best.candidate_id, chosen_by=chosen_by, among=among,
         reason=verdict(best.verification), noop=noop)
    final, report = await rt.bench.verify(best.patch, final=True)
    if report is None:
        report = InstanceReport(instance_id=rt.iid, patch_exists=True, patch_successfully_applied=True,
                                resolved=bool(final.passed), completed=final.passed is not None)
    return {
        "chosen": {"candidate_id": best.candidate_id, "patch": best.patch, "chosen_by": chosen_by, "noop": noop},
        "final": {"verification": final.model_dump(mode="json"),
                  "report": report.model_dump(mode="json") | {"completed": report.completed}},
    }


async def may_fix(rt: RepairRuntime, state: Any) -> tuple[list[dict[str, Any]] | None, dict[str, bool]]:
    """(the state's attempts with a patch that may be the fix, as the state holds them: none that changes no code
    when the tests fail at the base commit, see `choose.leave_out_noops`; None when every one changes no code;
    the noop verdicts, for `submit`)."""
    found = [a for a in attempts_of(state) if a.patch.strip()]
    base_failed, noops = await noop_check(rt.bench, state, [a.patch for a in found])
    kept = leave_out_noops(found, noops, base_failed, rt.events, rt.iid)
    if kept is None:
        return None, noops
    ids = {a.candidate_id for a in kept}
    return [a for a in state.get("attempts") or [] if a["patch"].strip() and a["candidate_id"] in ids], noops


def declined(chosen_by: str) -> dict[str, Any]:
    """The state update of a choice that submits nothing, and why (`noop`: every candidate changes no code while
    the tests fail at the base commit); the outcome's `chosen_by` says it."""
    return {"chosen": None, "final": {"declined": chosen_by}}


__all__ = ["attempts_of", "declined", "emit", "may_fix", "runtime", "submit"]

