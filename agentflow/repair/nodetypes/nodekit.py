"""What the repair node types share: events, what the state holds (evidence, ranked suspects, how candidates
are verified), and submitting a choice or nothing."""

from __future__ import annotations

from collections.abc import Mapping

from agentflow.events import Event
from agentflow.events.kinds import RepairChoice
from agentflow.repair.locate.localize import RunEvidence
from agentflow.repair.locate.spectrum import evidence_from_json
from agentflow.repair.nodetypes.runtime import RepairRuntime
from agentflow.repair.nodetypes.state import RepairState
from agentflow.repair.outcome import Candidate
from agentflow.repair.run.progress import verdict
from agentflow.repair.verify.choose import is_noop, leave_out_noops, noop_check
from agentflow.repair.verify.targeting import SuiteReach
from agentflow.repair.verify.workbench import HowToVerify
from agentflow.swe.report import InstanceReport


def emit(rt: RepairRuntime, event: Event) -> None:
    """Record a task's event: attributed to the task (its `node_id` and `instance_id`)."""
    rt.events.write(event.model_copy(update={"node_id": rt.iid, "instance_id": rt.iid}))


def evidence_of(state: RepairState) -> RunEvidence:
    """The `swe.spectrum` node's evidence in the state (none when the workflow has no such node)."""
    return evidence_from_json(state.get("spectrum"))


def ranked_of(state: RepairState) -> list[tuple[str, str]]:
    """The ranked suspects in the state, as (path, name) pairs (none before `swe.rank` / `swe.localize`)."""
    return [(path, name) for path, name in state.get("ranked") or []]


def how_to_verify(state: RepairState) -> HowToVerify:
    """How the task's candidates are verified, as the state alone says (a resumed task verifies as the killed one
    did): the base verification, the selected tests' command, which tests reach which function, a kept
    reproduction."""
    reproduction, spectrum = state.get("reproduction") or {}, state.get("spectrum") or {}
    return HowToVerify(
        base=state.get("base"),
        test_cmd=(state.get("regression") or {}).get("test_cmd") or None,
        reach=SuiteReach.from_json(spectrum.get("reach")) if isinstance(spectrum, dict) else None,
        repro=(reproduction.get("script") or None) if reproduction.get("kept") else None,
        repro_tests=tuple(reproduction.get("tests") or ()) if reproduction.get("kept") else (),
    )


async def submit(rt: RepairRuntime, state: RepairState, best: Candidate, chosen_by: str | None, *,
                 among: int | None = None, noops: Mapping[str, bool] | None = None) -> RepairState:
    """The state update of a chosen candidate: the choice (a `repair.choice` event, with whether it changes no
    code as `noops` says or checked now), its final verification and report."""
    noop = await is_noop(rt.bench, best.patch, noops)
    emit(rt, RepairChoice(candidate_id=best.candidate_id, chosen_by=chosen_by, among=among,
                          reason=verdict(best.verified), noop=noop))

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
    """(the state's attempts with a patch that may be the fix, `choose.leave_out_noops`; the noop verdicts, for
    `submit`)."""
    found = [a for a in state.get("attempts") or [] if a.patch.strip()]
    base_failed, noops = await noop_check(rt.bench, state, [a.patch for a in found])
    return leave_out_noops(found, noops, base_failed, rt.events, rt.iid), noops


def declined(chosen_by: str) -> RepairState:
    """The state update of a choice that submits nothing, and why (the outcome's `chosen_by`)."""
    return {"chosen": None, "final": {"declined": chosen_by}}


__all__ = ["declined", "emit", "evidence_of", "how_to_verify", "may_fix", "ranked_of", "submit"]

