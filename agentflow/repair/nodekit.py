"""What the repair node types share: the task's runtime from a node's context, events, the search's attempts
as the state holds them, and submitting a choice (graded with the task's tests for the report)."""

from __future__ import annotations

from typing import Any

from agentflow.errors import UserError
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
                 noop: bool | None = None) -> dict[str, Any]:
    """The state update of a chosen candidate: the choice (a `repair.choice` event: which one of `among`
    candidates, what decided, its verification in words, whether it changes no code: `noop`, None when not
    checked), and its final verification and report."""
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


__all__ = ["attempts_of", "emit", "runtime", "submit"]

