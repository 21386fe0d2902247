"""The repair's node types, usable from any workflow (`type: swe.rank`) and registered with the graph layer.

    swe.baseline     the task's tests on the unchanged code             -> base
    swe.spectrum     the issue's examples and the suite, call-traced     -> spectrum
    swe.rank         the coder ranks the heuristic's suspects            -> ranked
    swe.reproduce    blind mode: a script that fails like the bug, and
                     one of what must keep working                       -> reproduction, base
    swe.plan         the planner says which function and what to change  -> plan
    swe.edit         one edit sample from the branch's candidate       -> edit, drawn, focus, suspects, hint
    swe.test         applies the edit, diffs it, verifies it; verdict    -> candidate, tried, attempts, verdict
    swe.critique     a failed attempt's review joins the next attempt's feedback -> candidate
    swe.choose       no noop if the bug shows, tests, keep check, examples,
                     vote, verifier; graded                              -> chosen, final
    swe.value        the value agent values a tested attempt; its assessment joins the feedback -> value
    swe.discriminate agents argue over the finalists, a judge picks      -> chosen, final
    swe.localize     the model: skeleton -> files -> functions -> lines  -> ranked, localized
    swe.regression   blind mode: passing tests minus the model's picks   -> regression, base
    swe.trajectories multi-turn edit + test-script trajectories at once -> attempts, samples, tests, search
    swe.vote_tests   votes by the generated tests, then a selector      -> chosen, final

The rollout steps (`swe.edit` -> `swe.test` -> `swe.critique` / `swe.value`) run as graph nodes under a graph
`search:` node (`rollout.py`, `workflows/repair.yaml`).

Every node is `async (state: RepairState, ctx: NodeContext[RepairRuntime], settings: ItsSettings) -> RepairState`:
the task's handles are the run's `deps` (`nodekit.runtime`), its steps run with `settings.over(rt.cfg)`, and it
writes plain data to the state (`state.py`: JSON values, `Candidate`s and `Verification`s), so a checkpoint after each node lets a killed repair
resume where it stopped.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable

from agentflow.graph.context import NodeContext
from agentflow.graph.nodetypes import NodeType
from agentflow.repair import rollout
from agentflow.repair.choose import choose, noop_check
from agentflow.repair.config import RepairConfig
from agentflow.repair.discriminate import DiscriminateSettings, discriminate_node
from agentflow.repair.expectations import TracedExample, checkable, expectation_script, read_expectations
from agentflow.repair.localize import RunEvidence
from agentflow.repair.localize_model import LocalizeSettings, localize_node
from agentflow.repair.nodekit import (
    VERIFY_READS,
    declined,
    emit,
    evidence_of,
    how_to_verify,
    ranked_of,
    runtime,
    submit,
)
from agentflow.repair.outcome import Candidate
from agentflow.repair.regression import RegressionSettings, regression_node
from agentflow.repair.rollout import SweCritiqueSettings, SweEditSettings, SweTestSettings, SweValueSettings
from agentflow.repair.runtime import PROMPT_FIELDS, NodeSettings, RepairRuntime, repair_fields
from agentflow.repair.spectrum import (
    examples_changed,
    examples_reach_code,
    examples_shown,
    issue_examples,
    names_to_import,
)
from agentflow.repair.state import RepairState, ReproductionRecord
from agentflow.repair.steps import (
    make_plan,
    rank_suspects,
    write_expectations,
    write_keep_check,
    write_reproduction,
)
from agentflow.repair.testgen import VoteTestsSettings, vote_tests_node
from agentflow.repair.trajectory import TrajectorySettings, trajectories_node


@repair_fields("spectrum", "test_timeout_s")
class SpectrumSettings(NodeSettings):
    """Settings of the swe.spectrum node type."""


@repair_fields("rank", "rank_pool", "rank_lines", *PROMPT_FIELDS)
class RankSettings(NodeSettings):
    """Settings of the swe.rank node type."""


@repair_fields("reproduce", "reproduce_attempts", "reproduce_from_examples", "keep_check", "temperature", "max_tokens", *PROMPT_FIELDS)
class ReproduceSettings(NodeSettings):
    """Settings of the swe.reproduce node type."""


@repair_fields("plan", "max_tokens", *PROMPT_FIELDS)
class PlanSettings(NodeSettings):
    """Settings of the swe.plan node type."""


@repair_fields("vote", "vote_by_examples", "compare_examples")
class ChooseSettings(NodeSettings):
    """Settings of the swe.choose node type."""


_emit = emit


# ----------------------------------------------------------------------------------------------- before search


async def baseline(state: RepairState, ctx: NodeContext[RepairRuntime], settings: None) -> RepairState:
    rt = runtime(ctx)
    base = await rt.bench.verify_base(how_to_verify(state))
    return {"base": base, "issue": rt.issue}


async def spectrum(state: RepairState, ctx: NodeContext[RepairRuntime], settings: SpectrumSettings) -> RepairState:
    rt = runtime(ctx)
    cfg = settings.over(rt.cfg)
    if not cfg.spectrum:
        return {"spectrum": {}}
    sources = await rt.bench.python_sources()
    _, summary = await rt.bench.gather_evidence(rt.issue, sources, test_timeout_s=cfg.test_timeout_s,
                                                how=how_to_verify(state))
    top = [f"{p}:{q}" for p, q, _ in summary["suspicion"][:5]]
    _emit(rt, "repair.spectrum", examples=summary["examples"], executed=len(summary["executed"]),
          tests=summary["tests"], suspects=top, problems=summary["problems"])
    return {"spectrum": summary}


async def rank(state: RepairState, ctx: NodeContext[RepairRuntime], settings: RankSettings) -> RepairState:
    rt = runtime(ctx)
    cfg = settings.over(rt.cfg)
    if not cfg.rank:
        return {"ranked": []}
    sources = await rt.bench.python_sources()
    prefer = await rank_suspects(rt.models.coder, cfg, rt.issue, sources, state["base"].output, seed=cfg.seed,
                                 evidence=evidence_of(state))
    ranked = [[path, name] for path, name in prefer]
    _emit(rt, "repair.rank", ranked=[f"{p}:{n}" for p, n in prefer])
    return {"ranked": ranked}


async def reproduce(state: RepairState, ctx: NodeContext[RepairRuntime], settings: ReproduceSettings) -> RepairState:
    rt = runtime(ctx)
    cfg, bench = settings.over(rt.cfg), rt.bench
    base = state["base"]
    if not (bench.mode == "repo" and base.passed and cfg.reproduce and cfg.test_cmd is None):
        return {"reproduction": {"kept": None}}
    sources = await bench.python_sources()
    prefer = ranked_of(state)
    evidence = evidence_of(state)
    previous: tuple[str, str] | None = None
    examples = examples_to_check(rt, state) if cfg.reproduce_from_examples else []
    for attempt in range(cfg.reproduce_attempts):
        if attempt == 0 and examples:
            script, why = await _script_from_examples(rt, cfg, examples, sources)
        else:
            script = await write_reproduction(rt.models.coder, cfg, rt.issue, sources, seed=cfg.seed + attempt,
                                              previous=previous, prefer=prefer, evidence=evidence)
            why = "no code block in the answer"
        kept, output = await bench.install_repro(script) if script else (False, why)
        _emit(rt, "repair.reproduce", kept=kept, script=script, output=output[-1500:],
              source="examples" if attempt == 0 and examples else "model")
        if kept and script:
            # the base again, the script's failure counted: the tests fail there now
            base = await bench.verify_base(dataclasses.replace(how_to_verify(state), repro=script))
            reproduction: ReproductionRecord = {"kept": True, "script": script}
            if cfg.keep_check:
                reproduction["keep_check"] = await _keep_check(rt, cfg, sources, script, prefer, evidence)
            return {"reproduction": reproduction, "base": base}
        previous = (script or "", output)
    return {"reproduction": {"kept": False}}


def examples_to_check(rt: RepairRuntime, state: RepairState) -> list[TracedExample]:
    """The issue's examples whose values a reproduction can check (`expectations.checkable`), with what the
    spectrum's run of them showed on the unchanged code; none when that run did not happen or did not report."""
    summary = state.get("spectrum") or {}
    shown, statements = summary.get("shown") or [], issue_examples(rt.issue)
    # examples that called no repository code use a name the issue never defines (an object it uses but never
    # builds): a script of them fails in itself, never the way the bug does
    if not summary.get("executed") or len(shown) != len(statements):
        return []
    return checkable(statements, shown)


async def _script_from_examples(rt: RepairRuntime, cfg: RepairConfig, examples: list[TracedExample],
                                sources: dict[str, str]) -> tuple[str | None, str]:
    """(the reproduction from the issue's `examples` (`examples_to_check`) and the values the model says they
    should give, or None and why there is none)."""
    answer = await write_expectations(rt.models.coder, cfg, rt.issue, examples, seed=cfg.seed)
    statements = issue_examples(rt.issue)
    script = expectation_script(statements, names_to_import(statements, sources),
                                read_expectations(answer, examples))
    return script, "" if script else f"the answer gave no expected value that differs from the code's:\n{answer[:500]}"


async def _keep_check(rt: RepairRuntime, cfg: RepairConfig, sources: dict[str, str], reproduction: str,
                      prefer: list[tuple[str, str]], evidence: RunEvidence) -> str | None:
    """The keep-working check beside a kept reproduction (`RepairConfig.keep_check`): the model's script cut
    down to its checks that pass at the base commit, or None."""
    script = await write_keep_check(rt.models.coder, cfg, rt.issue, sources, reproduction, seed=cfg.seed,
                                    prefer=prefer, evidence=evidence)
    kept, output = await rt.bench.install_keep_check(script, sources) if script else (None, "no code block in the answer")
    _emit(rt, "repair.keep_check", kept=kept is not None, script=script, check=kept, output=output[-1500:])
    return kept


async def plan(state: RepairState, ctx: NodeContext[RepairRuntime], settings: PlanSettings) -> RepairState:
    rt = runtime(ctx)
    cfg = settings.over(rt.cfg)
    if rt.models.planner is None or not (cfg.plan or cfg.planner_model):
        return {"plan": ""}
    sources = await rt.bench.python_sources()
    prefer = ranked_of(state)
    text = await make_plan(rt.models.planner, cfg, rt.issue, sources, seed=cfg.seed, prefer=prefer,
                           evidence=evidence_of(state))
    _emit(rt, "repair.plan", plan=text)
    return {"plan": text}


# ----------------------------------------------------------------------------------------------- search


_EDIT_READS = ("base", "ranked", "spectrum", "plan", "candidate", "drawn", "focus", "suspects", "hint", "reproduction")
_REVIEW_READS = ("base", "tried", "candidate", "verdict")


# ----------------------------------------------------------------------------------------------- choosing


def _distinct_patches(patches: Iterable[str]) -> dict[str, str]:
    """The non-empty patches by their stripped text (the key results are looked up by), each as given to apply:
    stripping can cut a hunk's last context line when it is blank, which `git apply` then refuses."""
    out: dict[str, str] = {}
    for patch in patches:
        if patch.strip():
            out.setdefault(patch.strip(), patch if patch.endswith("\n") else patch + "\n")
    return out


async def compare_examples(rt: RepairRuntime, attempts: list[Candidate]) -> tuple[dict[str, bool], dict[str, tuple[str, ...]]]:
    """Per distinct patch, whether the issue's examples show something else on it than on the unchanged code
    (`spectrum.examples_changed`), and what they show on it (`spectrum.examples_shown`, for the vote); each
    patch's examples run once in the task's sandbox, no model call."""
    patches = _distinct_patches(a.patch for a in attempts)
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
    _emit(rt, "repair.examples", compared=len(runs), changed=sum(changed.values()), usable=bool(changed),
          behaviours=len(set(shown.values())))
    return changed, shown


async def check_keeps(rt: RepairRuntime, attempts: list[Candidate], script: str) -> dict[str, bool]:
    """Per distinct patch of the candidates that fix the reproduction, whether the keep-working check (kept at the
    base commit by `swe.reproduce`) still passes on it; each patch's check runs once in the sandbox."""
    patches = _distinct_patches(a.patch for a in attempts if a.verified.reproduced is False)
    if len(patches) < 2:
        return {}
    if not await rt.bench.keeps_working("", script):  # it passed there before; a flaky check is not used
        return {}
    held = {key: await rt.bench.keeps_working(patch, script) for key, patch in patches.items()}
    _emit(rt, "repair.keeps", compared=len(held), held=sum(held.values()))
    return held


async def choose_node(state: RepairState, ctx: NodeContext[RepairRuntime], settings: ChooseSettings) -> RepairState:
    rt = runtime(ctx)
    cfg, attempts = settings.over(rt.cfg), list(state.get("attempts") or [])
    base_failed, noops = await noop_check(rt.bench, state, [a.patch for a in attempts])
    keep_script = (state.get("reproduction") or {}).get("keep_check")
    keeps = await check_keeps(rt, attempts, keep_script) if keep_script else {}
    changed, shown = await compare_examples(rt, attempts) if cfg.compare_examples or cfg.vote_by_examples else ({}, {})
    confirm = functools.partial(rt.bench.verify_whole, how=how_to_verify(state))
    best, chosen_by = await choose(attempts, cfg, rt.models.verifier, rt.issue, rt.budget, rt.events,
                                   changed if cfg.compare_examples else {}, keeps=keeps, shown=shown,
                                   confirm=confirm, noops=noops, base_failed=base_failed, instance_id=rt.iid)
    if best is None:
        return declined(chosen_by) if chosen_by else {"chosen": None}
    return await submit(rt, state, best, chosen_by, among=sum(1 for a in attempts if a.patch.strip()), noops=noops)


_NODE_TYPES = [
    NodeType("swe.baseline", baseline, None, (), ("base", "issue"), "the task's tests on the unchanged code"),
    NodeType("swe.spectrum", spectrum, SpectrumSettings, ("base", "regression"), ("spectrum",),
             "the issue's examples and the repository's pytest suite run call-traced: which functions failing runs reach"),
    NodeType("swe.rank", rank, RankSettings, ("base", "spectrum"), ("ranked",), "the coder ranks the heuristic's suspect functions"),
    NodeType("swe.reproduce", reproduce, ReproduceSettings, (*VERIFY_READS, "ranked"), ("reproduction", "base"),
             "blind mode: a script that fails while the bug is present, kept only if it does; then a check of what "
             "must keep working, kept if it passes"),
    NodeType("swe.plan", plan, PlanSettings, ("ranked",), ("plan",), "the planner: which function, what to change"),
    NodeType("swe.edit", rollout.edit_node, SweEditSettings, _EDIT_READS, ("edit", "drawn", "focus", "suspects", "hint"),
             "one edit sample from the candidate a chain builds on (in a search: the branch's)"),
    NodeType("swe.test", rollout.test_node, SweTestSettings,
             (*VERIFY_READS, "edit", "candidate", "tries", "attempts", "retried"),
             ("edit", "tried", "candidate", "attempts", "tries", "verdict", "value", "retried", "hint"),
             "applies an edit, takes its patch, verifies it; verdict pass / retry / stop"),
    NodeType("swe.critique", rollout.critique_node, SweCritiqueSettings, _REVIEW_READS, ("candidate",),
             "a failed attempt's review joins its feedback"),
    NodeType("swe.choose", choose_node, ChooseSettings, ("attempts", *VERIFY_READS), ("chosen", "final"),
             "none that changes no code when the tests fail at the base commit, then tests, then the keep-working "
             "check, then what the issue's examples show, then the vote, then the verifier model; graded"),
    NodeType("swe.value", rollout.value_node, SweValueSettings, (*_REVIEW_READS, "attempts"), ("candidate", "attempts", "value"),
             "the value agent: a value guides the search, its assessment the next expansion"),
    NodeType("swe.discriminate", discriminate_node, DiscriminateSettings, ("attempts", *VERIFY_READS),
             ("chosen", "final"),
             "agents argue over the finalists (none that changes no code when the tests fail at the base commit), "
             "a judge picks; the choice graded"),
    NodeType("swe.localize", localize_node, LocalizeSettings, ("base",), ("ranked", "localized"),
             "the model localizes: skeleton -> files -> functions -> edit locations, merged with the heuristic"),
    NodeType("swe.regression", regression_node, RegressionSettings, VERIFY_READS, ("regression", "base"),
             "blind mode: the passing tests minus those the model says the fix may change verify candidates"),
    NodeType("swe.trajectories", trajectories_node, TrajectorySettings, (*VERIFY_READS, "ranked"),
             ("attempts", "samples", "tests", "search"),
             "parallel multi-turn trajectories, each writing a test script and an edit, the script run between turns"),
    NodeType("swe.vote_tests", vote_tests_node, VoteTestsSettings, ("attempts", "tests", *VERIFY_READS),
             ("chosen", "final"),
             "candidates vote by the generated tests they pass (none that changes no code when the tests fail at "
             "the base commit); a selection trajectory splits a tie; graded"),
]

# every repair type works on a task's RepairRuntime, which `agentflow.repair` sets up as the run's deps
# (`needs`), and on a RepairState
NODE_TYPES = [dataclasses.replace(t, needs="repair", state=RepairState) for t in _NODE_TYPES]

__all__ = ["NODE_TYPES"]
