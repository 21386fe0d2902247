"""`swe.mutants`: candidates made without a model. Before the search, each single-site change of the top
suspect functions (a flipped comparison, a bound or constant one off, a negated condition, a swapped operator:
`agentflow.synth.mutate.REPAIR_OPERATORS`) is verified as a candidate, until one passes.

Why: a small model, shown the faulty function, often returns it unchanged or changes the wrong token, while
many faults are one token wrong; trying every such change of the best-localized functions costs test runs, not
model calls (the mutation operators of mutation-based program repair). A passing one joins the candidates and
ends the search before its first model call; the others are reported as attempts (events) only: many near-copies
of the code that fail would outweigh the model's samples wherever candidates are counted.
"""

from __future__ import annotations

import time

from pydantic import Field

from agentflow.events.kinds import MutantsStop, RepairAttempt, RepairMutants
from agentflow.graph.run.context import NodeContext
from agentflow.repair.edit.steps import suspects
from agentflow.repair.locate.localize import Window
from agentflow.repair.nodetypes.nodekit import emit as emit_task
from agentflow.repair.nodetypes.nodekit import evidence_of, how_to_verify, ranked_of
from agentflow.repair.nodetypes.rollout import current_of, emit, sources_at
from agentflow.repair.nodetypes.runtime import RepairRuntime, ShowsCodeSettings
from agentflow.repair.nodetypes.state import RepairState
from agentflow.repair.outcome import Candidate
from agentflow.synth.mutate import REPAIR_OPERATORS, Mutation, file_mutations


class MutantsSettings(ShowsCodeSettings):
    """Settings of the swe.mutants node type (the suspects are ranked as the edit's are)."""

    mutants: bool = True
    """Before the search, verify each single-site change of the best suspect functions (`REPAIR_OPERATORS`)
    as a candidate, until one passes; only when the tests fail at the base commit; no model call (off with
    `-c mutants=false`)."""
    mutants_functions: int = Field(default=3, ge=1, le=10)
    """Suspect functions (the ranked suspects' best, with the functions nested in them) whose changes are
    tried."""
    mutants_limit: int = Field(default=80, ge=1, le=1000)
    """Changes verified at most, the first function's first (each a test run of the tests reaching it)."""
    mutants_seconds: float = Field(default=120.0, gt=0)
    """Wall seconds the step may spend: no change is started after them (on a big suite each test run takes
    seconds, and the search's model calls need the task's time)."""


def suspect_functions(windows: list[Window], count: int) -> list[tuple[str, str]]:
    """(path, qualified name) of the first `count` distinct functions among the ranked windows."""
    out: list[tuple[str, str]] = []
    for window in windows:
        if window.symbol and (window.path, window.symbol) not in out:
            out.append((window.path, window.symbol))
    return out[:count]


def mutants_of(sources: dict[str, str], functions: list[tuple[str, str]],
               marks: dict[str, tuple[int, ...]] | None = None) -> list[Mutation]:
    """Every repair change of `functions` (and of the functions nested in them), function by function in
    rank order; within one, changes of the lines a line spectrum marks first, then the operators' order. Two
    changes that give the same file are one."""
    out: list[Mutation] = []
    seen: set[str] = set()
    by_file: dict[str, list[Mutation]] = {}
    for path, name in functions:
        if path not in sources:
            continue
        if path not in by_file:
            by_file[path] = file_mutations(path, sources[path], REPAIR_OPERATORS)
        marked = set((marks or {}).get(path, ()))
        own = [m for m in by_file[path] if m.function == name or m.function.startswith(name + ".")]
        for mutation in sorted(own, key=lambda m: m.start not in marked):  # stable: operators' order kept
            key = f"{path}:{mutation.start}:{'|'.join(mutation.new_lines)}"
            if key not in seen:
                seen.add(key)
                out.append(mutation)
    return out


async def mutants_node(state: RepairState, ctx: NodeContext[RepairRuntime], settings: MutantsSettings) -> RepairState:
    """`swe.mutants`: the changes of `mutants_of` verified in turn, each reported (`repair.attempt`), until one
    passes (a candidate, in `attempts`), `mutants_limit` were tried or `mutants_seconds` are spent."""
    rt = ctx.deps
    base = state.get("base")
    if not settings.mutants or base is None or base.passed is not False:
        return {}
    bench, how = rt.bench, how_to_verify(state)
    root = current_of(state, rt.iid)
    sources = await sources_at(rt, bench, "")  # read once: the search's first edits read the same
    evidence = evidence_of(state)
    windows = suspects(settings, sources, rt.issue, root["feedback"], focus=0, prefer=ranked_of(state),
                       evidence=evidence)
    functions = suspect_functions(windows, settings.mutants_functions)
    changes = mutants_of(sources, functions, dict(evidence.marks))
    passed: Candidate | None = None
    started_step = time.monotonic()
    deadline = started_step + settings.mutants_seconds
    tried = 0
    stopped: MutantsStop = "all"
    for number, mutation in enumerate(changes, 1):
        if number > settings.mutants_limit or time.monotonic() > deadline:
            stopped = "limit" if number > settings.mutants_limit else "seconds"
            break
        tried = number
        async with bench.lock:
            started = time.monotonic()
            verified = await bench.verify_files("", {mutation.path: mutation.apply(sources[mutation.path])}, how)
        if verified is None:
            continue
        patch, dropped, verification, _ = verified
        cand = Candidate(instance_id=rt.iid, candidate_id=f"{rt.iid}/mutant.{number}",
                         parent_id=root["built_on"].candidate_id, status="ok", patch=patch,
                         dropped_test_files=dropped, verification=verification, finish_reason="mutant",
                         window=f"{mutation.path}:{mutation.function}",  # as `window_key` names a function's
                         mutant=mutation.operator)
        rt.record(cand)
        emit(ctx, RepairAttempt(value=verification.score, passed=verification.passed, dropped_test_files=dropped,
                                duration_s=round(time.monotonic() - started, 4), part_of=None),
             rt, cand.candidate_id, cand.parent_id)
        if verification.passed:
            passed, stopped = cand, "passed"
            break
    emit_task(rt, RepairMutants(functions=[f"{path}:{name}" for path, name in functions], changes=len(changes),
                                tried=tried, seconds=round(time.monotonic() - started_step, 3),
                                passed=passed.candidate_id if passed else None, stopped=stopped))
    async with bench.lock:
        await bench.reset()
    return {"attempts": [*(state.get("attempts") or []), passed]} if passed else {}


__all__ = ["MutantsSettings", "mutants_node", "mutants_of", "suspect_functions"]
