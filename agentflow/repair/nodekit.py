"""What the repair node types share: the task's runtime from a node's context, events, what the state holds
(the spectrum's evidence, the ranked suspects, the search's attempts, how candidates are verified), and
submitting a choice (graded with the task's tests for the report) or nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentflow.errors import UserError
from agentflow.graph.context import NodeContext
from agentflow.repair.choose import is_noop, leave_out_noops, noop_check
from agentflow.repair.localize import RunEvidence
from agentflow.repair.outcome import Candidate
from agentflow.repair.progress import verdict
from agentflow.repair.runtime import RepairRuntime
from agentflow.repair.spectrum import evidence_from_json
from agentflow.repair.state import RepairState
from agentflow.repair.targeting import SuiteReach
from agentflow.repair.workbench import HowToVerify
from agentflow.swe.report import InstanceReport


def runtime(ctx: NodeContext[RepairRuntime]) -> RepairRuntime:
    """The task's `RepairRuntime` (the run's `deps`); a UserError when the node runs outside a repair."""
    found: object = ctx.deps  # typed for the node; whatever the run was given
    if not isinstance(found, RepairRuntime):
        raise UserError(
            f"node '{ctx.node}' is a repair step and runs only inside a repair",
            hint="run it with 'agentflow repair --workflow FILE' or 'agentflow bench --workflow FILE'",
        )
    return found


def emit(rt: RepairRuntime, kind: str, **data: Any) -> None:
    rt.events.emit(kind, node_id=rt.iid, instance_id=rt.iid, **data)


def evidence_of(state: RepairState) -> RunEvidence:
    """The `swe.spectrum` node's evidence in the state (none when the workflow has no such node)."""
    return evidence_from_json(state.get("spectrum"))


def ranked_of(state: RepairState) -> list[tuple[str, str]]:
    """The ranked suspects in the state, as (path, name) pairs (none before `swe.rank` / `swe.localize`)."""
    return [(path, name) for path, name in state.get("ranked") or []]


VERIFY_READS = ("base", "regression", "reproduction", "spectrum")
"""The state keys `how_to_verify` reads: every node type that verifies reads them."""


def how_to_verify(state: RepairState) -> HowToVerify:
    """How the task's candidates are verified, as the state says (the state alone: a resumed task, in a new
    sandbox, verifies as the killed one did): the base verification, the selected regression tests' command
    (`swe.regression`), which tests reach which function (`swe.spectrum`) and a kept reproduction script
    (`swe.reproduce`)."""
    reproduction, spectrum = state.get("reproduction") or {}, state.get("spectrum") or {}
    return HowToVerify(
        base=state.get("base"),
        test_cmd=(state.get("regression") or {}).get("test_cmd") or None,
        reach=SuiteReach.from_json(spectrum.get("reach")) if isinstance(spectrum, dict) else None,
        repro=(reproduction.get("script") or None) if reproduction.get("kept") else None,
    )


async def submit(rt: RepairRuntime, state: RepairState, best: Candidate, chosen_by: str | None, *,
                 among: int | None = None, noops: Mapping[str, bool] | None = None) -> RepairState:
    """The state update of a chosen candidate: the choice (a `repair.choice` event: which one of `among`
    candidates, what decided, its verification in words, whether it changes no code: `noop`, as `noops` from
    `choose.noop_check` says or checked now), and its final verification (as `state` says, `how_to_verify`)
    and report."""
    noop = await is_noop(rt.bench, best.patch, noops)
    emit(rt, "repair.choice", candidate_id=best.candidate_id, chosen_by=chosen_by, among=among,
         reason=verdict(best.verified), noop=noop)
    final, report = await rt.bench.verify(best.patch, how_to_verify(state), final=True)
    if report is None:
        report = InstanceReport(instance_id=rt.iid, patch_exists=True, patch_successfully_applied=True,
                                resolved=bool(final.passed), completed=final.passed is not None)
    return {
        "chosen": {"candidate_id": best.candidate_id, "patch": best.patch, "chosen_by": chosen_by, "noop": noop},
        "final": {"verification": final,
                  "report": report.model_dump(mode="json") | {"completed": report.completed}},
    }


async def may_fix(rt: RepairRuntime, state: RepairState) -> tuple[list[Candidate] | None, dict[str, bool]]:
    """(the state's attempts with a patch that may be the fix: none that changes no code when the tests fail at
    the base commit, see `choose.leave_out_noops`; None when every one changes no code; the noop verdicts, for
    `submit`)."""
    found = [a for a in state.get("attempts") or [] if a.patch.strip()]
    base_failed, noops = await noop_check(rt.bench, state, [a.patch for a in found])
    return leave_out_noops(found, noops, base_failed, rt.events, rt.iid), noops


def declined(chosen_by: str) -> RepairState:
    """The state update of a choice that submits nothing, and why (`noop`: every candidate changes no code while
    the tests fail at the base commit); the outcome's `chosen_by` says it."""
    return {"chosen": None, "final": {"declined": chosen_by}}


__all__ = ["VERIFY_READS", "declined", "emit", "evidence_of", "how_to_verify", "may_fix", "ranked_of",
           "runtime", "submit"]

