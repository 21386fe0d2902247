"""The repair's node types (`swe.*`, listed with what each does in `NODE_TYPES`), usable from any workflow and
registered with the graph layer. Each is `async (state: RepairState, ctx: NodeContext[RepairRuntime],
settings: ItsSettings) -> RepairState` and writes plain data (`nodetypes/state.py`), so a checkpoint after
each node lets a killed repair resume where it stopped. The rollout steps (`swe.edit` -> `swe.test` ->
`swe.critique` / `swe.value`) are in `nodetypes/rollout.py`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from pydantic import Field

from agentflow.events.kinds import (
    RepairExamples,
    RepairKeepCheck,
    RepairKeeps,
    RepairPlan,
    RepairRank,
    RepairReproduce,
    RepairSpectrum,
)
from agentflow.graph.compile.nodetypes import NodeRun, NodeType, SettingsT
from agentflow.graph.run.context import NodeContext
from agentflow.reasoning.state import PlanKeys
from agentflow.repair.config import RepairConfig
from agentflow.repair.edit.steps import (
    make_plan,
    rank_suspects,
    write_expectations,
    write_keep_check,
    write_reproduction,
)
from agentflow.repair.locate.localize import RunEvidence
from agentflow.repair.locate.spectrum import (
    examples_changed,
    examples_reach_code,
    examples_shown,
    names_to_import,
)
from agentflow.repair.locate.statement import read_statement
from agentflow.repair.nodetypes import rollout
from agentflow.repair.nodetypes.discriminate import DiscriminateSettings, discriminate_node
from agentflow.repair.nodetypes.localize_model import LocalizeSettings, localize_node
from agentflow.repair.nodetypes.mutants import MutantsSettings, mutants_node
from agentflow.repair.nodetypes.nodekit import (
    declined,
    emit,
    evidence_of,
    how_to_verify,
    ranked_of,
    submit,
)
from agentflow.repair.nodetypes.regression import RegressionSettings, regression_node
from agentflow.repair.nodetypes.rollout import (
    SweCritiqueSettings,
    SweEditSettings,
    SweTestSettings,
    SweValueSettings,
)
from agentflow.repair.nodetypes.runtime import (
    HelperSettings,
    NodeSettings,
    RepairRuntime,
    ShowsCodeSettings,
    run_default,
)
from agentflow.repair.nodetypes.state import (
    AttemptsKeys,
    BaseKeys,
    CandidateKeys,
    ChoiceKeys,
    DrawKeys,
    DrawnKeys,
    EditKeys,
    LocalizedKeys,
    RankedKeys,
    RegressionKeys,
    RepairState,
    ReproductionKeys,
    ReproductionRecord,
    ResampledKeys,
    SearchValueKeys,
    SpectrumKeys,
    TaskKeys,
    TrajectoryKeys,
    TriedKeys,
    VerifyKeys,
)
from agentflow.repair.nodetypes.testgen import VoteTestsSettings, vote_tests_node
from agentflow.repair.nodetypes.trajectory import TrajectorySettings, trajectory_node
from agentflow.repair.outcome import Candidate
from agentflow.repair.verify.choose import ChooseSettings, choose, distinct_patches, noop_check
from agentflow.repair.verify.expectations import (
    TracedExample,
    checkable,
    expectation_script,
    read_expectations,
)
from agentflow.repair.verify.workbench import failures_first


class SpectrumSettings(NodeSettings):
    """Settings of the swe.spectrum node type."""

    spectrum: bool = True
    """Before ranking (the `swe.spectrum` node), run the issue's examples and the repository's pytest suite under
    a call tracer in the sandbox: functions the examples ran, and those failing tests reach more than passing
    ones, rank higher (spectrum-based localization; no model call)."""
    line_marks: bool = False
    """After the function-level run, trace the lines of the `line_marks_functions` most suspect functions in a
    second, targeted run (the failing tests and the passing tests that reach them, fitted to the test-time
    budget; and the issue's examples), and mark in the edit prompt's code the few lines every failing run
    executes and few passing tests do (`agentflow.repair.locate.lines`)."""
    line_marks_functions: int = Field(default=3, ge=1, le=10)
    """Suspect functions whose lines the `line_marks` run traces (the function-level spectrum's best, and those
    tied with the last of them, at most twice as many)."""
    test_timeout_s: float = run_default("test_timeout_s")


class RankSettings(ShowsCodeSettings):
    """Settings of the swe.rank node type."""

    rank: bool = True
    """Before the search the coder ranks the heuristic's best functions (one short call); its picks follow the
    heuristic's `rank_keep` best-scored suspects, in its order, and the heuristic's order fills the rest."""
    rank_pool: int = Field(default=8, ge=2, le=30)
    """Functions the ranking call chooses among (the heuristic's best)."""
    rank_lines: int = Field(default=15, ge=1)
    """Lines of each function shown to the ranking call (longer ones are cut, marked `...`)."""


class ReproduceSettings(ShowsCodeSettings, HelperSettings):
    """Settings of the swe.reproduce node type."""

    reproduce: bool = True
    """Blind mode (`feedback: repo`): a reproduction that fails at the base commit scores candidates too. The
    failing tests a failing-test report names, when the workspace has them and they fail there; else, when the
    repository's tests pass at the base commit, a script the model writes, kept if it fails at the base commit."""
    reproduce_attempts: int = Field(default=2, ge=1, le=5)
    """Tries at a reproduction script; each later try sees why the previous one did not count."""
    reproduce_from_examples: bool = True
    """The first reproduction try, when the issue shows examples whose values can be checked: the model says
    only what each should give once fixed, and the script is the issue's own statements with those values
    asserted (`agentflow.repair.verify.expectations`); kept or refused as any reproduction. It counts as one of the
    `reproduce_attempts`."""
    keep_check: bool = True
    """Once a reproduction script is kept, ask for a second script asserting what the fix must not change (what
    the issue says works today or must keep working), cut down to its checks that pass at the base commit
    (`agentflow.repair.verify.keepcheck`). Among candidates on which the reproduction no longer fails and the tests
    rank equal, and before the examples and the vote, those that still pass it are preferred (one model call
    a task with a kept reproduction; each candidate's check runs in the sandbox). Without it, several samples
    of the same wrong patch can outvote the fix while breaking behaviour the issue says must keep working,
    which neither the reproduction nor the failing tests check."""
    temperature: float = run_default("temperature")


class PlanSettings(ShowsCodeSettings, HelperSettings):
    """Settings of the swe.plan node type."""

    plan: bool = False
    """Ask a planner once per task which function is wrong and what to change; the plan is shown to the coder."""


# ----------------------------------------------------------------------------------------------- before search


async def baseline(state: RepairState, ctx: NodeContext[RepairRuntime], settings: None) -> RepairState:
    rt = ctx.deps
    base = await rt.bench.verify_base(how_to_verify(state))
    return {"base": base, "issue": rt.issue}


async def spectrum(state: RepairState, ctx: NodeContext[RepairRuntime], settings: SpectrumSettings) -> RepairState:
    rt = ctx.deps
    if not settings.spectrum:
        return {"spectrum": {}}
    sources = await rt.bench.python_sources()
    _, summary = await rt.bench.gather_evidence(rt.issue, sources, test_timeout_s=settings.test_timeout_s,
                                                how=how_to_verify(state))
    if settings.line_marks:
        summary["lines"] = await rt.bench.line_evidence(rt.issue, sources, summary,
                                                        functions=settings.line_marks_functions,
                                                        test_timeout_s=settings.test_timeout_s, how=how_to_verify(state))
    top = [f"{p}:{q}" for p, q, _ in summary["suspicion"][:5]]
    lines = summary.get("lines") or {}
    emit(rt, RepairSpectrum(examples=summary["examples"], executed=len(summary["executed"]),
                             tests=summary["tests"], suspects=top, problems=summary["problems"],
                             marked=[f"{p}:{line}" for p, line, *_ in lines.get("marks", [])],
                             line_problems=lines.get("problems", [])))
    return {"spectrum": summary}


async def rank(state: RepairState, ctx: NodeContext[RepairRuntime], settings: RankSettings) -> RepairState:
    rt = ctx.deps
    if not settings.rank:
        return {"ranked": []}
    sources = await rt.bench.python_sources()
    prefer = await rank_suspects(rt.models.coder, settings, rt.issue, sources, state["base"].output,
                                 seed=settings.seed, evidence=evidence_of(state))
    emit(rt, RepairRank(ranked=[f"{p}:{n}" for p, n in prefer]))
    return {"ranked": [[path, name] for path, name in prefer]}


async def reproduce(state: RepairState, ctx: NodeContext[RepairRuntime], settings: ReproduceSettings) -> RepairState:
    rt = ctx.deps
    bench = rt.bench
    base = state["base"]
    if not (bench.mode == "repo" and settings.reproduce):
        return {"reproduction": {"kept": None}}
    sources = await bench.python_sources()
    # a failing-test report's own tests, when the workspace has them, are the reproduction: run, not written
    if tests := read_statement(rt.issue).tests_in(sources):
        kept, output = await bench.install_repro_tests(tests)
        emit(rt, RepairReproduce(kept=kept, script=None, output=output[-1500:], source="tests", tests=tests))
        if kept:
            # the base's suite result stands (these tests are part of it, and just failed): nothing runs again
            base = base.model_copy(update={"reproduced": True, "passed": False,
                                           "output": failures_first(output, base.output)})
            return {"reproduction": {"kept": True, "tests": tests}, "base": base}
    if not (base.passed and rt.cfg.tests.cmd is None):
        return {"reproduction": {"kept": None}}
    prefer = ranked_of(state)
    evidence = evidence_of(state)
    previous: tuple[str, str] | None = None
    examples = examples_to_check(rt, state) if settings.reproduce_from_examples else []
    for attempt in range(settings.reproduce_attempts):
        if attempt == 0 and examples:
            script, why = await _script_from_examples(rt, settings, examples, sources)
        else:
            script = await write_reproduction(rt.models.coder, settings, rt.issue, sources,
                                              seed=settings.seed + attempt,
                                              previous=previous, prefer=prefer, evidence=evidence)
            why = "no code block in the answer"
        kept, output = await bench.install_repro(script) if script else (False, why)
        emit(rt, RepairReproduce(kept=kept, script=script, output=output[-1500:],
                                  source="examples" if attempt == 0 and examples else "model"))
        if kept and script:
            # the base again, the script's failure counted: the tests fail there now
            base = await bench.verify_base(dataclasses.replace(how_to_verify(state), repro=script))
            reproduction: ReproductionRecord = {"kept": True, "script": script}
            if settings.keep_check:
                reproduction["keep_check"] = await _keep_check(rt, settings, sources, script, prefer, evidence)
            return {"reproduction": reproduction, "base": base}
        previous = (script or "", output)
    return {"reproduction": {"kept": False}}


def examples_to_check(rt: RepairRuntime, state: RepairState) -> list[TracedExample]:
    """The issue's examples whose values a reproduction can check (`expectations.checkable`), with what the
    spectrum's run of them showed on the unchanged code; none when that run did not happen or did not report."""
    summary = state.get("spectrum") or {}
    shown, statements = summary.get("shown") or [], list(read_statement(rt.issue).examples)
    # examples that called no repository code use a name the issue never defines (an object it uses but never
    # builds): a script of them fails in itself, never the way the bug does
    if not summary.get("executed") or len(shown) != len(statements):
        return []
    return checkable(statements, shown)


async def _script_from_examples(rt: RepairRuntime, settings: ReproduceSettings, examples: list[TracedExample],
                                sources: dict[str, str]) -> tuple[str | None, str]:
    """(the reproduction from the issue's `examples` (`examples_to_check`) and the values the model says they
    should give, or None and why there is none)."""
    answer = await write_expectations(rt.models.coder, settings, rt.issue, examples, seed=settings.seed)
    statements = list(read_statement(rt.issue).examples)
    script = expectation_script(statements, names_to_import(statements, sources),
                                read_expectations(answer, examples))
    return script, "" if script else f"the answer gave no expected value that differs from the code's:\n{answer[:500]}"


async def _keep_check(rt: RepairRuntime, settings: ReproduceSettings, sources: dict[str, str], reproduction: str,
                      prefer: list[tuple[str, str]], evidence: RunEvidence) -> str | None:
    """The keep-working check beside a kept reproduction (`ReproduceSettings.keep_check`): the model's script cut
    down to its checks that pass at the base commit, or None."""
    script = await write_keep_check(rt.models.coder, settings, rt.issue, sources, reproduction, seed=settings.seed,
                                    prefer=prefer, evidence=evidence)
    kept, output = await rt.bench.install_keep_check(script, sources) if script else (None, "no code block in the answer")
    emit(rt, RepairKeepCheck(kept=kept is not None, script=script, check=kept, output=output[-1500:]))
    return kept


async def plan(state: RepairState, ctx: NodeContext[RepairRuntime], settings: PlanSettings) -> RepairState:
    rt = ctx.deps
    if rt.models.planner is None or not (settings.plan or rt.cfg.roles.planner):
        return {"plan": ""}
    sources = await rt.bench.python_sources()
    prefer = ranked_of(state)
    text = await make_plan(rt.models.planner, settings, rt.issue, sources, seed=settings.seed, prefer=prefer,
                           evidence=evidence_of(state))
    emit(rt, RepairPlan(plan=text))
    return {"plan": text}


# ----------------------------------------------------------------------------------------------- choosing


async def compare_examples(rt: RepairRuntime, attempts: list[Candidate]) -> tuple[dict[str, bool], dict[str, tuple[str, ...]]]:
    """Per distinct patch, whether the issue's examples show something else on it than on the unchanged code
    (`spectrum.examples_changed`), and what they show on it (`spectrum.examples_shown`, for the vote); each
    patch's examples run once in the task's sandbox, no model call."""
    patches = distinct_patches(a.patch for a in attempts)
    if len(patches) < 2:
        return {}, {}
    await rt.bench.reset()
    sources = await rt.bench.python_sources()
    base = await rt.bench.show_examples("", rt.issue, sources)
    if not examples_reach_code(base):  # nothing to compare: spare running every candidate
        return {}, {}
    again = await rt.bench.show_examples("", rt.issue, sources)
    runs = {key: await rt.bench.show_examples(patch, rt.issue, sources) for key, patch in patches.items()}
    changed, shown = examples_changed(base, again, runs), examples_shown(base, again, runs)
    emit(rt, RepairExamples(compared=len(runs), changed=sum(changed.values()), usable=bool(changed),
                             behaviours=len(set(shown.values()))))
    return changed, shown


async def check_keeps(rt: RepairRuntime, attempts: list[Candidate], script: str) -> dict[str, bool]:
    """Per distinct patch of the candidates that fix the reproduction, whether the keep-working check (kept at the
    base commit by `swe.reproduce`) still passes on it; each patch's check runs once in the sandbox."""
    patches = distinct_patches(a.patch for a in attempts if a.verified.reproduced is False)
    if len(patches) < 2:
        return {}
    if not await rt.bench.keeps_working("", script):  # it passed there before; a flaky check is not used
        return {}
    held = {key: await rt.bench.keeps_working(patch, script) for key, patch in patches.items()}
    emit(rt, RepairKeeps(compared=len(held), held=sum(held.values())))
    return held


async def choose_node(state: RepairState, ctx: NodeContext[RepairRuntime], settings: ChooseSettings) -> RepairState:
    rt = ctx.deps
    attempts = list(state.get("attempts") or [])
    base_failed, noops = await noop_check(rt.bench, state, [a.patch for a in attempts])
    keep_script = (state.get("reproduction") or {}).get("keep_check")
    keeps = await check_keeps(rt, attempts, keep_script) if keep_script else {}
    changed, shown = await compare_examples(rt, attempts) if settings.compare_examples or settings.vote_by_examples else ({}, {})
    confirm = functools.partial(rt.bench.verify_whole, how=how_to_verify(state))
    best, chosen_by = await choose(attempts, settings, rt.models.verifier, rt.issue, rt.budget, rt.events,
                                   changed if settings.compare_examples else {}, keeps=keeps, shown=shown,
                                   confirm=confirm, noops=noops, base_failed=base_failed, instance_id=rt.iid)
    if best is None:
        return declined(chosen_by) if chosen_by else {"chosen": None}
    return await submit(rt, state, best, chosen_by, among=sum(1 for a in attempts if a.patch.strip()), noops=noops)


# ----------------------------------------------------------------------------------------------- the types
# Each type's reads and writes: groups of `RepairState`'s keys (`agentflow.repair.nodetypes.state`).


RepairNodeType = NodeType[RepairState, RepairRuntime, SettingsT]
"""A repair node type: it takes a `RepairState` and works on the task's `RepairRuntime` (the run's deps, set up
by `agentflow.repair`: `needs`)."""


def _repair(name: str, run: NodeRun[RepairState, RepairRuntime, SettingsT], settings: type[SettingsT] | None,
            reads: tuple[type, ...], writes: tuple[type, ...], description: str,
            calls: Callable[[SettingsT, RepairConfig], int] | None = None) -> RepairNodeType[SettingsT]:
    return NodeType(name, run, settings, reads, writes, description, needs="repair", state=RepairState,
                    deps=RepairRuntime, calls=calls)


def _edit_calls(settings: SweEditSettings, run: RepairConfig) -> int:
    """A tool-calling edit views and edits files in several calls; any other edit is one answer."""
    return max(1, settings.tool_steps // 2) if settings.for_coder(run).edit_format == "tools" else 1


NODE_TYPES: list[RepairNodeType[Any]] = [
    _repair("swe.baseline", baseline, None, (), (BaseKeys, TaskKeys), "the task's tests on the unchanged code"),
    _repair("swe.spectrum", spectrum, SpectrumSettings, (BaseKeys, RegressionKeys), (SpectrumKeys,),
            "the issue's examples and the repository's pytest suite run call-traced: which functions failing runs "
            "reach"),
    _repair("swe.rank", rank, RankSettings, (BaseKeys, SpectrumKeys), (RankedKeys,),
            "the coder ranks the heuristic's suspect functions", lambda s, run: int(s.rank)),
    _repair("swe.reproduce", reproduce, ReproduceSettings, (VerifyKeys, RankedKeys), (BaseKeys, ReproductionKeys),
            "blind mode: the failing tests a report names, or a script, that fail while the bug is present, kept "
            "only if they do; then, beside a script, a check of what must keep working, kept if it passes",
            lambda s, run: (1 + int(s.keep_check)) if s.reproduce and run.tests.feedback != "task" else 0),
    _repair("swe.plan", plan, PlanSettings, (RankedKeys,), (PlanKeys,), "the planner: which function, what to change",
            lambda s, run: int(s.plan or run.roles.planner is not None)),
    _repair("swe.mutants", mutants_node, MutantsSettings, (VerifyKeys, RankedKeys, SpectrumKeys, AttemptsKeys),
            (AttemptsKeys,), "single-site changes of the best suspects (a comparison, a bound, a condition, an "
            "operator) verified until one passes, before the search; no model call (off with -c mutants=false)"),
    _repair("swe.edit", rollout.edit_node, SweEditSettings,
            (BaseKeys, RankedKeys, SpectrumKeys, PlanKeys, CandidateKeys, DrawKeys, ReproductionKeys,
             ResampledKeys),
            (EditKeys, DrawKeys, ResampledKeys),
            "one edit sample from the candidate a chain builds on (in a search: the branch's)", _edit_calls),
    _repair("swe.test", rollout.test_node, SweTestSettings,
            (VerifyKeys, EditKeys, CandidateKeys, TriedKeys, AttemptsKeys, ResampledKeys),
            (EditKeys, TriedKeys, CandidateKeys, AttemptsKeys, SearchValueKeys, ResampledKeys),
            "applies an edit, takes its patch, verifies it; verdict pass / retry / stop"),
    _repair("swe.critique", rollout.critique_node, SweCritiqueSettings, (BaseKeys, TriedKeys, CandidateKeys),
            (CandidateKeys,), "a failed attempt's review joins its feedback",
            lambda s, run: int(s.critique or run.roles.critic is not None)),
    _repair("swe.choose", choose_node, ChooseSettings, (AttemptsKeys, VerifyKeys), (ChoiceKeys,),
            "none that changes no code when the tests fail at the base commit, then tests, then the keep-working "
            "check, then what the issue's examples show, then the vote, then the verifier model; graded",
            lambda s, run: int(run.roles.verifier is not None)),
    _repair("swe.value", rollout.value_node, SweValueSettings, (BaseKeys, TriedKeys, CandidateKeys, AttemptsKeys),
            (CandidateKeys, AttemptsKeys, SearchValueKeys),
            "the value agent: a value guides the search, its assessment the next expansion", lambda s, run: 1),
    _repair("swe.discriminate", discriminate_node, DiscriminateSettings, (AttemptsKeys, VerifyKeys), (ChoiceKeys,),
            "agents argue over the finalists (none that changes no code when the tests fail at the base commit), "
            "a judge picks; the choice graded", lambda s, run: s.finalists * s.debaters + 1),
    _repair("swe.localize", localize_node, LocalizeSettings, (BaseKeys,), (RankedKeys, LocalizedKeys),
            "the model localizes: skeleton -> files -> functions -> edit locations, merged with the heuristic",
            lambda s, run: 3),
    _repair("swe.regression", regression_node, RegressionSettings, (VerifyKeys,), (BaseKeys, RegressionKeys),
            "blind mode: the passing tests minus those the model says the fix may change verify candidates",
            lambda s, run: 1),
    _repair("swe.trajectory", trajectory_node, TrajectorySettings, (VerifyKeys, RankedKeys),
            (AttemptsKeys, TrajectoryKeys, DrawnKeys),
            "a multi-turn trajectory writing a test script and an edit, the script run between turns (a search's "
            "branch each)", lambda s, run: s.turns),
    _repair("swe.vote_tests", vote_tests_node, VoteTestsSettings, (AttemptsKeys, VerifyKeys, TrajectoryKeys),
            (ChoiceKeys,), "candidates vote by the generated tests they pass (none that changes no code when the "
            "tests fail at the base commit); a selection trajectory splits a tie; graded", lambda s, run: 1),
]

__all__ = ["NODE_TYPES", "RepairNodeType"]
