"""The repair's attempt as graph nodes: `swe.edit` -> `swe.test` -> `swe.critique` / `swe.value`, looped while
the tests fail and attempts remain. Under a graph `search:` node (`workflows/repair.yaml`) each branch runs them
in its own fork of the task's workspace (`ctx.run.sandbox`), its state plain data (`nodetypes/state.py`).

A branch builds on its best attempt so far: an edit that scores below the candidate it started from is recorded,
but the next edit starts from the candidate again.
"""

from __future__ import annotations

import ast
import time
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from agentflow.budget import BudgetExceeded
from agentflow.events import Event
from agentflow.events.kinds import (
    RepairAttempt,
    RepairBase,
    RepairResample,
    RepairStopped,
    RepairToolEdit,
    RepairValue,
)
from agentflow.graph.run.context import NodeContext
from agentflow.graph.search.settings import BRANCH_SEP
from agentflow.graph.search.tree import spread
from agentflow.models.ask import ask
from agentflow.models.base import ChatModel
from agentflow.models.fim import FIM_FORMATS, FimFormat, fim_format
from agentflow.reasoning.value import ValueJudgement, read_judgement
from agentflow.repair.edit.edits import edit_parts
from agentflow.repair.edit.infill import FILL_TOKENS, Hole, fill_prompt, read_fill, statement_holes
from agentflow.repair.edit.overlay import SourceOverlay
from agentflow.repair.edit.steps import (
    PROMPTS,
    EditPrompt,
    ReadEdits,
    ask_helper,
    critique,
    edit_prompt,
    failure_report,
    read_answer,
    suspects,
)
from agentflow.repair.locate.focus import FocusSchedule, window_key
from agentflow.repair.locate.localize import RunEvidence, Window
from agentflow.repair.nodetypes.nodekit import emit as emit_task
from agentflow.repair.nodetypes.nodekit import evidence_of, how_to_verify, ranked_of
from agentflow.repair.nodetypes.runtime import (
    EditFormatSettings,
    HelperSettings,
    NodeSettings,
    RepairRuntime,
    ShowsCodeSettings,
    run_default,
)
from agentflow.repair.nodetypes.state import (
    EditRecord,
    HeadRecord,
    RepairState,
    Verdict,
    checkpointed_candidates,
    solved,
    task_candidates,
)
from agentflow.repair.outcome import Candidate
from agentflow.repair.verify.workbench import HowToVerify, Verification, Workbench

SAMPLE_STRIDE = 1000
"""Sample numbers of branch `bK` are (K + 1) * SAMPLE_STRIDE + n (n: the lineage's n-th sample): distinct seeds
and candidate ids for concurrent branches, the same for a seed whatever order they run in."""


# ----------------------------------------------------------------------------------------------- shared


class SplitEditsSettings(NodeSettings):
    """The settings of the node types that verify an edit's changes one at a time (`swe.edit`, `swe.test`)."""

    split_edits: bool = True
    """An edit that fails its tests and changes several places (separate runs of lines) is also verified one
    change at a time, each a candidate of its own (no model call): small models often fix the bug and break
    something beside it (a signature they were not asked to touch)."""
    split_edits_limit: int = Field(default=4, ge=2, le=20)
    """Edits with more changes than this are not split (a rewrite, not a fix with a slip beside it)."""


EscalationStep = Literal["format", "failure", "suspect", "infill"]
NOOP_ESCALATION: tuple[EscalationStep, ...] = ("format", "failure", "suspect")
"""What a branch's next try changes after an answer that changed nothing (drawing the same prompt again mostly
gives the same answer back), one change per such answer, in this order, each kept for the tries after it: the
other edit format (rewrite <-> SEARCH/REPLACE), then the failure the bug causes shown (`steps.failure_report`),
then the next suspect (again for each further noop). `infill` (not in the default) asks a code model for the
window's statements one at a time in its fill-in-the-middle format instead (`edit.infill`), where the coder
has one. A change that cannot be made is passed over. The default of the `noop_escalation` setting."""
InfillFormat = Literal["auto", "none", "qwen2.5-coder", "starcoder2"]


class SweEditSettings(EditFormatSettings, ShowsCodeSettings, HelperSettings, SplitEditsSettings):
    """Settings of the swe.edit node type."""

    temperature: float = run_default("temperature")
    stop: list[str] = Field(default_factory=lambda: ["END_EDITS"])
    """Stop sequences of edit answers."""
    tool_steps: int = Field(default=8, ge=1, le=50)
    """edit_format tools: model calls of one edit (viewing and editing files, then a last answer)."""
    noop_retries: int = Field(default=3, ge=0, le=20)
    """Extra samples when an answer changes nothing or cannot be read (those are not candidates), each told what
    the one before did; after one that changed nothing the next asks another way (`noop_escalation`)."""
    noop_escalation: tuple[EscalationStep, ...] = Field(default=NOOP_ESCALATION, min_length=1)
    """The changes after answers that changed nothing, in order, each made once and the last again for each
    further one (`NOOP_ESCALATION`: format, failure, suspect)."""
    infill_format: InfillFormat = "auto"
    """The coder's fill-in-the-middle format for the `infill` step of `noop_escalation` (`models.fim`): `auto`
    is the family the model spec names (none for a chat model: the step is passed over), `none` never."""
    stop_on_success: bool = run_default("stop_on_success")
    failure_above_code: bool = False
    """The statement's assertion or exception output (a failing-test report's `E` lines) is shown again
    directly above the code to edit, as the failure to fix (`steps.failure_above_code`): the report shows it
    far above the code, past the test's source and the rest of the file."""


class SweTestSettings(SplitEditsSettings):
    """Settings of the swe.test node type."""

    max_attempts: int = run_default("max_attempts")
    stop_on_success: bool = run_default("stop_on_success")


class SweCritiqueSettings(HelperSettings):
    """Settings of the swe.critique node type."""

    critique: bool = False
    """After a failed attempt, ask a critic what is wrong; its notes join the next attempt's feedback (a
    `critic_model` of the run turns it on too)."""


class SweValueSettings(HelperSettings):
    """Settings of the swe.value node type."""

    value_weight: float = Field(default=1.0, ge=0, le=1)
    """Share of the value agent's value in an attempt's search value (the rest: its tests' score)."""


def bench_of(rt: RepairRuntime, ctx: NodeContext[RepairRuntime]) -> Workbench:
    """The task's workbench on the node's workspace (a search branch's own fork)."""
    sandbox = ctx.run.sandbox
    return rt.bench if sandbox is None or sandbox is rt.bench.sandbox else rt.bench.on(sandbox)


def branch_of(ctx: NodeContext[RepairRuntime]) -> tuple[str, int]:
    """(tag, number) of the search branch the node runs in: (`b3`, 3); (`m`, -1) outside a search."""
    thread = ctx.run.branch
    if not thread:
        return "m", -1
    tag = thread.rsplit(BRANCH_SEP, 1)[-1]
    return tag, int(tag[1:]) if tag[1:].isdigit() else 0


def current_of(state: RepairState, iid: str) -> HeadRecord:
    """What the next edit builds on: the state's, else the unchanged code (the base verification's)."""
    found = state.get("candidate")
    if found:
        return found.copy()
    base = state.get("base") or Verification()
    root = Candidate(instance_id=iid, candidate_id=f"{iid}/root", parent_id=None, status="ok", verification=base)
    return {"built_on": root, "feedback": base.output, "value": base.score}


async def sources_at(rt: RepairRuntime, bench: Workbench, patch: str) -> dict[str, str]:
    """The Python sources at base + `patch`, read once per patch for the task (the workspace then is left at
    base + `patch`), so branches from one state ask for their samples at once (a batching model answers them
    together)."""
    if patch not in rt.source_cache:
        async with bench.lock:
            await bench.restore(patch)
            sources = await bench.python_sources()
        if len(rt.source_cache) >= 16:
            rt.source_cache.pop(next(iter(rt.source_cache)))
        rt.source_cache[patch] = sources
    return rt.source_cache[patch]


def emit(ctx: NodeContext[RepairRuntime], event: Event, rt: RepairRuntime, cand_id: str, parent_id: str | None) -> None:
    """A repair event of a candidate, through the node's event log (a branch's events name it)."""
    local = cand_id.removeprefix(f"{rt.iid}/")
    parent = parent_id.removeprefix(f"{rt.iid}/") if parent_id else None
    ctx.run.emit(event.model_copy(update={"node_id": local, "parent_id": parent}))


# ----------------------------------------------------------------------------------------------- swe.edit


def _schedule(state: RepairState) -> FocusSchedule:
    saved, schedule = state.get("focus"), FocusSchedule()
    if saved:
        schedule.shown.update(saved["shown"])
        schedule.declined.update(saved["declined"])
    return schedule


def suspect_order(schedule: FocusSchedule, windows: list[Window], sibling: int,
                  avoid: Collection[str] = ()) -> list[Window]:
    """The windows with the one the next sample rewrites first: the schedule's pick as the search's `sibling`-th
    child of one state takes it (`spread`: concurrent branches from one state start from distinct suspects
    while distinct ones remain), none in `avoid` (window keys) while others remain; the pick is counted."""
    if not windows:
        return []
    trial = FocusSchedule(schedule.decline_factor)
    trial.shown, trial.declined = Counter(schedule.shown), Counter(schedule.declined)
    chosen = spread(sibling, windows, lambda free: trial.pick(free)[0], key=window_key, avoid=avoid)
    schedule.shown[window_key(chosen)] += 1
    return [chosen, *(w for w in windows if w is not chosen)]


def _record_failed(ctx: NodeContext[RepairRuntime], rt: RepairRuntime, edit: EditRecord, status: str,
                   errors: list[str]) -> Candidate:
    """Record an answer that changed nothing or could not be read (`repair.resample`); it, for `resampled`."""
    cand = Candidate(instance_id=rt.iid, candidate_id=edit["candidate_id"], parent_id=edit["parent_id"],
                     status=status, edit_errors=errors, finish_reason=edit["finish"],  # type: ignore[arg-type]
                     sample=edit["sample"], answer=edit["answer"][:4000], window=edit["window"],
                     approach=edit.get("approach") or [])
    rt.record(cand)
    emit(ctx, RepairResample(status=status, errors=errors[:3]), rt, edit["candidate_id"], edit["parent_id"])
    return cand


async def draw_edit(rt: RepairRuntime, cfg: SweEditSettings, prompt: EditPrompt, sources: dict[str, str], *,
                    cand_id: str, parent_id: str, sample: int) -> tuple[str, str, ReadEdits]:
    """One sample of `prompt` (seeded `cfg.seed + sample`) read against `sources`: (the answer, its finish reason,
    what it does: a rewrite of the prompt's window, SEARCH/REPLACE blocks, or the files a tool-calling edit
    changed)."""
    if cfg.edit_format == "tools":
        return await edit_with_tools(rt, cfg, prompt.user, sources, cand_id=cand_id, sample=sample)
    coder = rt.models.coder
    with_node = getattr(coder, "with_node", None)
    answer = await ask(with_node(cand_id, parent_id) if with_node else coder, prompt.user, system=prompt.system,
                       temperature=cfg.temperature, seed=cfg.seed + sample,
                       max_tokens=prompt.max_tokens(cfg.max_tokens), stop=cfg.stop)
    return answer.text, answer.finish, read_answer(answer.text, answer.finish, prompt, sources)


def coder_fim(cfg: SweEditSettings, coder: ChatModel) -> FimFormat | None:
    """The coder's fill-in-the-middle format as `infill_format` names it (`auto`: the family its spec names)."""
    if cfg.infill_format == "auto":
        return fim_format(coder.spec)
    return None if cfg.infill_format == "none" else FIM_FORMATS[cfg.infill_format]


async def draw_fill(rt: RepairRuntime, cfg: SweEditSettings, fim: FimFormat, hole: Hole, *, cand_id: str,
                    parent_id: str, sample: int) -> tuple[str, str, ReadEdits]:
    """One fill of `hole` (seeded `cfg.seed + sample`), a raw prompt in the coder's format: (the fill, its
    finish reason, what it does to the hole's file)."""
    coder = rt.models.coder
    with_node = getattr(coder, "with_node", None)
    answer = await ask(with_node(cand_id, parent_id) if with_node else coder,
                       fill_prompt(fim, hole, rt.issue, rt.iid.split("__")[0]), raw=True,
                       temperature=cfg.temperature, seed=cfg.seed + sample, max_tokens=FILL_TOKENS, stop=fim.stop)
    return answer.text, answer.finish, read_fill(answer.text, hole)


async def edit_with_tools(rt: RepairRuntime, cfg: SweEditSettings, task: str, sources: dict[str, str], *,
                          cand_id: str, sample: int) -> tuple[str, str, ReadEdits]:
    """One tool-calling edit: the coder works on an in-memory overlay of the sources with the editor tools
    (samples edit concurrently; the sandbox stays free); the files it changed are the edit."""
    from agentflow.agents.agent import Agent
    from agentflow.agents.config import AgentConfig
    from agentflow.tools.context import ToolContext

    overlay = SourceOverlay(dict(sources))
    agent = Agent(AgentConfig(name="coder", tools=["editor"], step_limit=cfg.tool_steps,
                              max_tokens=cfg.max_tokens, temperature=cfg.temperature, tool_protocol="native"),
                  model=rt.models.coder)
    result = await agent.run(task, ctx=ToolContext(sandbox=overlay, events=rt.events), budget=rt.budget)
    text = str(getattr(result.output, "text", result.output) or "")
    finish = "stop" if result.stop_reason == "done" else result.stop
    changed = {p: t for p, t in overlay.changed().items() if p in sources}
    if not changed:
        errors = [f"no file was changed ({result.stop}{': ' + result.error if result.error else ''})"]
        return text, finish, ReadEdits("noop", errors=errors)
    for path, content in changed.items():
        try:
            ast.parse(content)
        except SyntaxError as exc:
            why = f"{path} does not parse after the edit: {exc.msg} (line {exc.lineno})"
            return text, finish, ReadEdits("apply_error", errors=[why])
    rt.events.write(RepairToolEdit(node_id=cand_id, instance_id=rt.iid, sample=sample, steps=result.usage.model_calls,
                                   stop_reason=result.stop, files=sorted(changed)))
    return text, finish, ReadEdits("ok", changed)


OTHER_FORMAT = {"rewrite": "search_replace", "search_replace": "rewrite"}


@dataclass
class Approach:
    """How a branch's next try asks (`NOOP_ESCALATION`): its settings (the edit format), its windows (the first
    the suspect it looks at), the failure report shown, the changes made so far."""

    cfg: SweEditSettings
    order: list[Window]
    failure: str = ""
    changes: list[EscalationStep] = field(default_factory=list)
    looked_at: set[str] = field(default_factory=set)
    """The suspects (`window_key`) tries of this draw looked at first."""
    fim: FimFormat | None = None
    """The coder's fill-in-the-middle format, when it has one (the `infill` change)."""
    infill: bool = False
    """Tries fill the first window's statements (`edit.infill`) instead of asking for an edit."""
    filled: set[str] = field(default_factory=set)
    """The holes (`Hole.key`) the chain filled (its `focus` record's, added to as tries fill more)."""

    def change(self, step: EscalationStep, failure: str, schedule: FocusSchedule, windows: list[Window], sibling: int) -> bool:
        """Make change `step` of `noop_escalation`; False when it cannot be made."""
        if step == "format":
            other = OTHER_FORMAT.get(self.cfg.edit_format)
            if other is None or (other == "rewrite" and not self.order):
                return False
            self.cfg = self.cfg.model_copy(update={"edit_format": other})
        elif step == "failure":
            if not failure or self.failure:
                return False
            self.failure = failure
        elif step == "infill":
            if self.fim is None or self.infill or not self.order:
                return False
            self.infill = True
        elif {window_key(w) for w in windows} <= self.looked_at:
            return False  # "suspect": every one was looked at
        else:
            self.order = suspect_order(schedule, windows, sibling, avoid=self.looked_at)
            self.looked_at.add(window_key(self.order[0]))
        self.changes.append(step)
        return True

    def after_noop(self, failure: str, schedule: FocusSchedule, windows: list[Window], sibling: int) -> EscalationStep | None:
        """The next change of `noop_escalation` that can be made (its last again once all were), made; or None."""
        order = self.cfg.noop_escalation
        steps = [step for step in order[:-1] if step not in self.changes] + [order[-1]]
        return next((step for step in steps if self.change(step, failure, schedule, windows, sibling)), None)

    def next_hole(self, sources: dict[str, str], evidence: RunEvidence | None) -> Hole | None:
        """The first window's next statement to fill (`statement_holes`: the marked lines first), or None when
        every one was filled."""
        window = self.order[0]
        marks = evidence.marks.get(window.path, ()) if evidence is not None else ()
        holes = statement_holes(window.path, sources.get(window.path, ""), window.start, window.end, marks)
        hole = next((h for h in holes if h.key not in self.filled), None)
        if hole is not None:
            self.filled.add(hole.key)
        return hole

    def hint(self, read: ReadEdits, change: EscalationStep | None) -> str:
        """What the next try is told: what the previous answer did (`part_edit_status`), what changed."""
        status = PROMPTS.render("part_edit_status.j2", status=read.status, gave_edit=True,
                                errors="; ".join(read.errors[:2]))
        first = self.order[0] if self.order else None
        symbol = f"`{first.symbol}` from {first.path}" if first is not None and first.symbol else "other code"
        return status + " " + PROMPTS.render("part_retry.j2", change=change or "", symbol=symbol,
                                             window=self.cfg.edit_format == "rewrite", failure=self.failure)


async def _task_solved(ctx: NodeContext[RepairRuntime], state: RepairState) -> bool:
    """A candidate of the task passed tests that decide, as the task's checkpoints hold it: one of this branch,
    of a concurrent one, or of the killed run a resumed task continues."""
    saver = ctx.run.checkpointer
    return solved(await checkpointed_candidates(saver) if saver is not None else task_candidates(state))


async def _draw(ctx: NodeContext[RepairRuntime], rt: RepairRuntime, cfg: SweEditSettings, state: RepairState,
                current: HeadRecord, sources: dict[str, str], windows: list[Window], schedule: FocusSchedule,
                drawn: list[int], resampled: list[Candidate], filled: set[str]) -> EditRecord | None:
    """One usable edit, or None: an answer that changes nothing or cannot be read is recorded (into `resampled`)
    and drawn again (`noop_retries`, `NOOP_ESCALATION`). `filled`: the holes the chain filled, added to."""
    tag, number = branch_of(ctx)
    sibling = ctx.run.sample or 0
    way = Approach(cfg, suspect_order(schedule, windows, sibling), fim=coder_fim(cfg, rt.models.coder),
                   filled=filled)
    way.looked_at.update(window_key(w) for w in way.order[:1])
    hint = ""
    failure = failure_report(rt.issue, str((state.get("spectrum") or {}).get("errors") or ""))
    # the line spectrum's marks name lines of the base commit: on a candidate's code they may have moved
    evidence = evidence_of(state) if not current["built_on"].patch.strip() else None
    for _ in range(cfg.noop_retries + 1):
        if cfg.stop_on_success and await _task_solved(ctx, state):
            return None
        n = len(drawn) + 1
        sample = (number + 1) * SAMPLE_STRIDE + n
        cand_id = f"{rt.iid}/{tag}.{n}"
        parent_id = current["built_on"].candidate_id
        hole = way.next_hole(sources, evidence) if way.infill else None
        if way.infill and hole is None:  # every statement of the window filled: the change after it
            way.after_noop(failure, schedule, windows, sibling)
            hole = way.next_hole(sources, evidence)
        prompt = None
        if hole is not None and way.fim is not None:
            text, finish, read = await draw_fill(rt, way.cfg, way.fim, hole, cand_id=cand_id, parent_id=parent_id,
                                                 sample=sample)
        else:  # an edit asked for (every statement of the window filled: asked again)
            prompt = edit_prompt(way.cfg, sources, rt.issue, current["feedback"], plan=state.get("plan") or "",
                                 hint=hint, windows=way.order, evidence=evidence)
            text, finish, read = await draw_edit(rt, way.cfg, prompt, sources, cand_id=cand_id, parent_id=parent_id,
                                                 sample=sample)
        drawn.append(sample)
        edit: EditRecord = {"candidate_id": cand_id, "parent_id": current["built_on"].candidate_id, "sample": sample,
                            "files": read.files, "errors": read.errors, "answer": text, "finish": finish,
                            "window": window_key(way.order[0]) if way.order else "", "approach": list(way.changes)}
        if read.status == "ok":
            return edit
        resampled.append(_record_failed(ctx, rt, edit, read.status, read.errors))
        if read.declined and prompt is not None and prompt.window is not None:  # the model found nothing to change there
            schedule.decline(prompt.window)
        # a fill that put its statement back is the model's word on that statement: the next fills the next one
        change = (way.after_noop(failure, schedule, windows, sibling) if read.status == "noop" and hole is None
                  else None)
        hint = way.hint(read, change)
    return None


async def edit_node(state: RepairState, ctx: NodeContext[RepairRuntime], settings: SweEditSettings) -> RepairState:
    """`swe.edit`: one edit sample from the candidate the branch builds on (nothing written yet)."""
    rt = ctx.deps
    cfg = settings.for_coder(rt.cfg)
    current = current_of(state, rt.iid)
    sources = await sources_at(rt, bench_of(rt, ctx), current["built_on"].patch)
    windows = suspects(cfg, sources, rt.issue, current["feedback"], focus=0,
                       prefer=ranked_of(state), evidence=evidence_of(state))
    schedule, drawn, resampled = _schedule(state), list(state.get("drawn") or []), list(state.get("resampled") or [])
    saved = state.get("focus")
    filled = set(saved.get("filled") or []) if saved is not None else set()
    updates: RepairState = {}
    if not state.get("suspects"):
        updates["suspects"] = [f"{w.path}:{w.symbol}" for w in windows]
        if not ctx.run.sample:  # the task's first edit (its search's first branch): what the search starts from
            base = state.get("base") or Verification()
            emit_task(rt, RepairBase(passed=base.passed, score=base.score, feedback=rt.bench.mode,
                                     reproduced=(state.get("reproduction") or {}).get("kept"),
                                     edit_format=cfg.edit_format, suspects=updates["suspects"]))
    try:
        edit = await _draw(ctx, rt, cfg, state, current, sources, windows, schedule, drawn, resampled, filled)
    except BudgetExceeded as exc:  # the branch ends here; its candidates so far stand
        edit = None
        ctx.emit(RepairStopped(limit=exc.kind))
    return {**updates, "edit": edit, "drawn": drawn, "resampled": resampled,
            "focus": {"shown": dict(schedule.shown), "declined": dict(schedule.declined), "filled": sorted(filled)}}


# ----------------------------------------------------------------------------------------------- swe.test


def _attempt(ctx: NodeContext[RepairRuntime], rt: RepairRuntime, edit: EditRecord, cand_id: str,
             tried: tuple[str, list[str], Verification, float], part_of: str | None = None) -> Candidate:
    """Record a verified candidate (`repair.attempt` event); it, for `attempts`."""
    patch, dropped, verification, started = tried
    cand = Candidate(
        instance_id=rt.iid, candidate_id=cand_id, parent_id=edit["parent_id"], status="ok", patch=patch,
        dropped_test_files=dropped, edit_errors=edit["errors"], verification=verification,
        finish_reason=edit["finish"], sample=edit["sample"], answer=edit["answer"][:4000] if part_of is None else "",
        part_of=part_of, window=edit["window"] if part_of is None else "",
        approach=(edit.get("approach") or []) if part_of is None else [],
    )
    rt.record(cand)
    emit(ctx, RepairAttempt(value=verification.score, passed=verification.passed, dropped_test_files=dropped,
                            duration_s=round(time.monotonic() - started, 4), part_of=part_of),
         rt, cand_id, edit["parent_id"])
    return cand


async def _parts(ctx: NodeContext[RepairRuntime], rt: RepairRuntime, bench: Workbench, how: HowToVerify,
                 cfg: SweTestSettings, edit: EditRecord, parent_patch: str, seen: set[str]) -> list[Candidate]:
    """Each change of a failed edit alone verified as a candidate of its own (`split_edits`), until one passes."""
    sources = await sources_at(rt, bench, parent_patch)
    out: list[Candidate] = []
    for number, files in enumerate(edit_parts(sources, edit["files"], limit=cfg.split_edits_limit), 1):
        async with bench.lock:
            tried = await bench.verify_files(parent_patch, files, how)
        if tried is None or tried[0].strip() in seen:
            continue
        seen.add(tried[0].strip())
        out.append(_attempt(ctx, rt, edit, f"{edit['candidate_id']}.{number}", tried, part_of=edit["candidate_id"]))
        if tried[2].passed:
            break
    return out


def _verdict(passed: bool | None, tries: int, max_attempts: int) -> Verdict:
    return "pass" if passed else ("retry" if tries < max_attempts else "stop")


async def test_node(state: RepairState, ctx: NodeContext[RepairRuntime], settings: SweTestSettings) -> RepairState:
    """`swe.test`: the edit written over the candidate, its patch (test files stripped) verified; the best of it
    (and of its parts) becomes the candidate when it scores at least as well."""
    rt = ctx.deps
    edit, current = state.get("edit"), current_of(state, rt.iid)
    tries = int(state.get("tries") or 0)
    if not edit:  # nothing was drawn (the budget, or stop_on_success): no attempt for a reviewer to look at
        return {"tried": None, "verdict": "stop"}
    bench, how = bench_of(rt, ctx), how_to_verify(state)
    tries += 1
    async with bench.lock:
        tried = await bench.verify_files(current["built_on"].patch, edit["files"], how)
    if tried is None:  # it only touched test files, which are stripped
        noop = _record_failed(ctx, rt, edit, "noop", ["only test files changed", *edit["errors"]])
        return {"edit": None, "tried": None, "tries": tries, "verdict": _verdict(None, tries, settings.max_attempts),
                "resampled": [*(state.get("resampled") or []), noop]}
    made = [_attempt(ctx, rt, edit, edit["candidate_id"], tried)]
    if tried[2].passed is not True and settings.split_edits:
        seen = {a.patch.strip() for a in [*(state.get("attempts") or []), *made]}
        made += await _parts(ctx, rt, bench, how, settings, edit, current["built_on"].patch, seen)
    best = max(made, key=lambda a: (a.verified.passed is True, a.verified.score))
    verification = best.verified
    attempts = [*(state.get("attempts") or []), *made]
    candidate = current
    if verification.score >= current["built_on"].verified.score:
        candidate = {"built_on": best, "feedback": verification.output, "value": verification.score}
    if candidate["built_on"].patch != made[-1].patch:
        async with bench.lock:
            await bench.restore(candidate["built_on"].patch)  # the workspace as the next edit builds on it
    return {"edit": None, "tried": best, "candidate": candidate, "attempts": attempts,
            "tries": tries, "verdict": _verdict(verification.passed, tries, settings.max_attempts),
            "value": candidate["value"]}


# ----------------------------------------------------------------------------------------------- review


def _reviewable(state: RepairState, iid: str,
                verdicts: tuple[Verdict, ...] = ("retry",)) -> tuple[Candidate, HeadRecord] | None:
    """(the attempt verified last, the candidate) when the chain goes on from that failed attempt (its verdict
    one of `verdicts`): what a critic or the value agent looks at."""
    tried, current = state.get("tried"), current_of(state, iid)
    if state.get("verdict") not in verdicts or not tried or tried.verified.passed is True:
        return None
    return (tried, current) if tried.candidate_id == current["built_on"].candidate_id else None


async def critique_node(state: RepairState, ctx: NodeContext[RepairRuntime], settings: SweCritiqueSettings) -> RepairState:
    """`swe.critique`: a critic's notes on a failed attempt the chain goes on from join the next edit's feedback
    (a no-op unless `critique` is on or a critic model is given)."""
    rt = ctx.deps
    found = _reviewable(state, rt.iid)
    if found is None or rt.models.critic is None or not (settings.critique or rt.cfg.roles.critic):
        return {}
    tried, current = found
    try:
        review = await critique(rt.models.critic, settings, rt.issue, tried.patch, tried.verified.output,
                                seed=settings.seed + tried.sample)
    except BudgetExceeded:
        return {}
    feedback = (current["feedback"] + "\n\n" if current["feedback"] else "") + f"Reviewer's notes on this change:\n{review}"
    return {"candidate": {**current, "feedback": feedback}}


async def judge_attempt(model: ChatModel, cfg: SweValueSettings, issue: str, patch: str,
                        verification: Verification, *, seed: int) -> ValueJudgement:
    """One call of the value agent (SWE-Search's value function): the issue, a tested patch and its test results
    in, a value and a written assessment out."""
    verdict = {True: "the tests pass", False: "the tests fail", None: "the tests cannot decide"}[verification.passed]
    tests = f"{verdict} (share passing: {verification.score:.2f})\n{verification.output[:2000]}".strip()
    values = {"issue": issue, "patch": patch[:3000], "tests": tests}
    return read_judgement(await ask_helper(model, cfg, "value", values, max_tokens=min(cfg.max_tokens, 200), seed=seed))


async def value_node(state: RepairState, ctx: NodeContext[RepairRuntime], settings: SweValueSettings) -> RepairState:
    """`swe.value`: the value agent values a failed attempt (a chain's last one too, when the route brings it
    here); the value (blended with the tests' score by `value_weight`) is the branch's search value, the
    assessment leads the next edit's feedback, and both are kept on the attempt for the final pick."""
    rt = ctx.deps
    found = _reviewable(state, rt.iid, ("retry", "stop"))
    if found is None:
        return {}
    tried, current = found
    verification = tried.verified
    try:
        judgement = await judge_attempt(rt.models.critic or rt.models.coder, settings, rt.issue, tried.patch,
                                        verification, seed=settings.seed + tried.sample)
    except BudgetExceeded:
        return {}
    judged = verification.score if judgement.value is None else judgement.value
    value = round(settings.value_weight * judged + (1 - settings.value_weight) * verification.score, 4)
    shown = f" (value {round(judgement.value * 100)}/100)" if judgement.value is not None else ""
    feedback = f"A reviewer's assessment of the current change{shown}:\n{judgement.assessment}\n\n{current['feedback']}"
    judged_one = {"value": judgement.value, "assessment": judgement.assessment}
    attempts = [a.model_copy(update=judged_one) if a.candidate_id == tried.candidate_id else a
                for a in state.get("attempts") or []]
    emit(ctx, RepairValue(value=judgement.value, search_value=value, assessment=judgement.assessment),
         rt, tried.candidate_id, None)
    return {"candidate": {**current, "feedback": feedback, "value": value}, "attempts": attempts, "value": value}


__all__ = ["NOOP_ESCALATION", "SAMPLE_STRIDE", "Approach", "SweCritiqueSettings", "SweEditSettings", "SweTestSettings",
           "SweValueSettings", "bench_of", "branch_of", "critique_node", "current_of", "draw_edit", "edit_node",
           "judge_attempt", "sources_at", "suspect_order", "test_node", "value_node"]
