"""Choosing the candidate to submit (in the order `choose_once` gives); a choice whose tests ran only where its
change reaches is confirmed by the whole suite.

The first rule (`noop_check`, `leave_out_noops`, `is_noop`) is every chooser's: `swe.choose`, `swe.discriminate`,
`swe.vote_tests` and the best candidate so far of a task cut at its wall-clock limit."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentflow.budget import Budget
from agentflow.errors import AgentflowError
from agentflow.events import EventLog
from agentflow.events.kinds import RepairConfirm, RepairNoop, RepairVote
from agentflow.models.ask import ask_request, charging
from agentflow.models.base import ChatModel
from agentflow.models.structured import chat_structured
from agentflow.repair.edit.steps import PROMPTS
from agentflow.repair.nodetypes.runtime import NodeSettings, run_default
from agentflow.repair.outcome import Candidate
from agentflow.repair.verify.workbench import Verification, Workbench
from agentflow.swe.normalize import normalise_output
from agentflow.swe.patch import changes_nothing, touched_in_place

VERIFIER_MAX_CHARS = 12_000
"""Most characters of a patch the verifier model is shown; a longer one keeps its start and its end."""


class Judgement(BaseModel):
    """The verifier model's structured judgement of one patch."""

    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)

    score: float = Field(ge=0.0, le=1.0)
    """How likely the work solves the task, from 0 (surely not) to 1 (surely)."""
    evidence: list[str] = Field(min_length=1)
    """Concrete observations behind the score (lines of the patch, test output, reasoning steps)."""
    summary: str = ""
    """The judgement in one sentence."""


def tests_key(a: Candidate) -> tuple[bool, float]:
    """How the tests rank a verified candidate: passing first, then by the share of tests passing."""
    return (a.verified.passed is True, a.verified.score)


class ChooseSettings(NodeSettings):
    """Settings of the swe.choose node type."""

    vote: bool = True
    """Among candidates the tests rank equal, prefer the patch most samples agree on (normalised)."""
    vote_by_examples: bool = True
    """The vote counts first the samples whose candidates make the issue's examples show the same (what each
    candidate's examples printed, echoed or raised, as `compare_examples` runs them; no model call), then the
    samples of the same normalised patch: different code with the same fix behaves the same on the report,
    while a small model rarely writes the same patch twice (execution-based agreement, as in MBR-exec and
    AlphaCode's clustering). Not used when the examples run no repository code or show something else on each
    run."""
    compare_examples: bool = True
    """Among candidates the tests rank equal, and before the vote, prefer those that change what the issue's
    examples show (each candidate's examples run in the sandbox and compared with the unchanged code's; no
    model call): a fix changes the behaviour the report shows, and a rewrite that leaves it as it was is not
    one. Not used when the examples run no repository code or show something else on each run."""
    seed: int = run_default("seed")


async def choose(attempts: Sequence[Candidate], cfg: ChooseSettings, verifier: ChatModel | None, issue: str,
                 budget: Budget, events: EventLog,
                 changed: Mapping[str, bool] | None = None, *,
                 keeps: Mapping[str, bool] | None = None,
                 shown: Mapping[str, tuple[str, ...]] | None = None,
                 confirm: Callable[[str], Awaitable[Verification]] | None = None,
                 noops: Mapping[str, bool] | None = None, base_failed: bool | None = None,
                 instance_id: str = "") -> tuple[Candidate | None, str | None]:
    """`choose_once` among the candidates that may be the fix (`leave_out_noops`; none: (None, "noop")), with the
    choice's whole-suite result confirmed: a candidate whose verification was estimated from the tests reaching
    its change (`Verification.targeted`) runs the whole suite (`confirm`, per patch) before it is chosen; when
    that says worse than the estimate, its verification becomes the whole suite's and the choice is made again."""
    pool = leave_out_noops([a for a in attempts if a.patch.strip()], noops, base_failed, events, instance_id)
    if pool is None:
        return None, "noop"
    while True:
        best, decided_by = await choose_once(pool, cfg, verifier, issue, budget, events, changed, keeps=keeps,
                                             shown=shown, instance_id=instance_id)
        if best is None or confirm is None or best.verified.targeted is None:
            return best, decided_by
        estimated = best.verified
        whole = await confirm(best.patch)
        held = (whole.passed is True, whole.score) >= tests_key(best)
        events.write(RepairConfirm(node_id=instance_id or None, instance_id=instance_id,
                                   candidate_id=best.candidate_id, targeted=estimated.targeted, held=held,
                                   estimated=list(estimated.counts or ()), whole=list(whole.counts or ()),
                                   seconds=whole.seconds))
        # samples of the same patch share its whole-suite result (copies: the state's candidates stay as verified)
        pool = [a.model_copy(update={"verification": whole.model_copy(deep=True)})
                if a.patch.strip() == best.patch.strip() else a for a in pool]
        if held:
            return best.model_copy(update={"verification": whole.model_copy(deep=True)}), decided_by


async def choose_once(attempts: Sequence[Candidate], cfg: ChooseSettings, verifier: ChatModel | None, issue: str,
                      budget: Budget, events: EventLog,
                      changed: Mapping[str, bool] | None = None, *,
                      keeps: Mapping[str, bool] | None = None,
                      shown: Mapping[str, tuple[str, ...]] | None = None,
                      instance_id: str = "") -> tuple[Candidate | None, str | None]:
    """The candidate to submit and what decided it: tests (passed, then share of tests passing), then the
    keep-working check (`keeps`: per patch, whether it still passes, see `nodes.ReproduceSettings.keep_check`; used only
    among candidates on which the reproduction script no longer fails, so a check asserting the bug cannot
    prefer a candidate that leaves it), then the issue's examples (`changed`: per patch, whether they show something else than on the unchanged code, see
    `spectrum.examples_changed`), then the vote, then the verifier model's judgement, then the smallest patch.
    The vote counts first the samples whose candidates make the examples show the same (`shown`: per patch,
    what they show on it; see `ChooseSettings.vote_by_examples`), then the samples of the same normalised
    patch. `instance_id` names the task in the events."""
    pool = [a for a in attempts if a.patch.strip()]
    if not pool:
        return None, None
    if len(pool) == 1:
        return pool[0], "only"

    top_key = max(tests_key(a) for a in pool)
    top = [a for a in pool if tests_key(a) == top_key]
    decided_by = "tests"
    if keeps and all(a.verified.reproduced is False for a in top):
        held = [a for a in top if keeps.get(a.patch.strip())]
        if 0 < len(held) < len(top):
            top, decided_by = held, "keep_check"
    if changed:
        moved = [a for a in top if changed.get(a.patch.strip())]
        if 0 < len(moved) < len(top):
            top, decided_by = moved, "examples"
    votes: dict[str, tuple[float, float]] = {}
    if cfg.vote and len(top) > 1:
        by_patch = {a.candidate_id: normalise_output(a.patch) for a in pool}
        # a candidate whose examples show a changed behaviour votes with it; the others by their patch
        behaviours = shown if shown and cfg.vote_by_examples else {}
        behaving = {a.candidate_id for a in pool if a.patch.strip() in behaviours}
        by_behaviour = {a.candidate_id: behaviours[a.patch.strip()] if a.candidate_id in behaving
                        else by_patch[a.candidate_id] for a in pool}
        behaviour_share, patch_share = _vote_shares(pool, by_behaviour), _vote_shares(pool, by_patch)
        votes = {a.candidate_id: (behaviour_share[a.candidate_id], patch_share[a.candidate_id]) for a in top}
        lead = max(v[0] for v in votes.values())
        leading = [cid for cid, v in votes.items() if v[0] == lead]
        # the behaviour vote decided only when one behaviour leads: a lead of equal patches is the plain vote's
        if (len({by_behaviour[cid] for cid in leading}) == 1 and leading[0] in behaving
                and len({v[0] for v in votes.values()}) > 1):
            decided_by = "behaviour_vote"
            events.write(RepairVote(node_id=instance_id or None, instance_id=instance_id, by="behaviour",
                                    clusters=len(set(by_behaviour.values())),
                                    patch_vote_choice=max(top, key=lambda a: (patch_share[a.candidate_id],
                                                                              -len(a.patch), -a.sample)).candidate_id))
        elif len(set(votes.values())) > 1:
            decided_by = "vote"
    judged: dict[str, float] = {}
    if verifier is not None and len(top) > 1:
        best_vote = max(votes.values(), default=(0.0, 0.0))
        finalists = [a for a in top if votes.get(a.candidate_id, (0.0, 0.0)) == best_vote][:4]
        if len(finalists) > 1:
            scores = await asyncio.gather(*(verifier_score(verifier, cfg, issue, a.patch, budget)
                                            for a in finalists))
            judged = {a.candidate_id: score for a, score in zip(finalists, scores, strict=True)}
            if len(set(judged.values())) > 1:
                decided_by = "verifier"
    best = max(top, key=lambda a: (votes.get(a.candidate_id, (0.0, 0.0)), judged.get(a.candidate_id, 0.0),
                                   -len(a.patch), -a.sample))
    return best, decided_by


async def verifier_score(model: ChatModel, cfg: ChooseSettings, issue: str, patch: str, budget: Budget) -> float:
    """The verifier model's score of `patch` for `issue`, from 0 to 1; 0 when the call fails (the budget
    included) or its reply does not validate as a `Judgement`. It cannot decide correctness, only break ties.
    Each call is charged to `budget` unless the model charges it itself (`charging`)."""
    work = patch or "(no output)"
    if len(work) > VERIFIER_MAX_CHARS:
        work = work[: VERIFIER_MAX_CHARS // 2] + "\n...[cut]...\n" + work[-VERIFIER_MAX_CHARS // 2 :]
    request = ask_request(PROMPTS.render("verifier_task.j2", issue=issue, work=work),
                          system=PROMPTS.render("verifier_system.j2"),
                          max_tokens=None, seed=cfg.seed, temperature=0.0)
    try:
        judgement, _ = await chat_structured(charging(model, budget), request, Judgement)
    except AgentflowError:
        return 0.0
    return judgement.score


def tests_fail_at_base(base: Verification | None) -> bool | None:
    """Whether the verifying tests fail at the base commit, so the bug shows there (the task's FAIL_TO_PASS tests;
    blind: the repository's tests, or a kept reproduction script); None when they were not run or cannot tell."""
    return None if base is None or base.passed is None else base.passed is False


def leave_out_noops(pool: Sequence[Candidate], noops: Mapping[str, bool] | None, base_failed: bool | None,
                    events: EventLog, instance_id: str = "") -> list[Candidate] | None:
    """The candidates of `pool` that may be the fix: when the tests fail at the base commit (`base_failed`, see
    `tests_fail_at_base`), one that changes no code (`noops`: per stripped patch, see `noop_check`) cannot be,
    unless the tests pass on it (then what it changes is behaviour after all: a docstring a test reads). Those
    left out are counted in a `repair.noop` event; None when every candidate is left out (nothing is to be
    submitted: the chooser says `noop`)."""
    if not base_failed or not noops:
        return list(pool)
    kept = [a for a in pool if not noops.get(a.patch.strip()) or a.verified.passed is True]
    if len(kept) < len(pool):
        events.write(RepairNoop(node_id=instance_id or None, instance_id=instance_id,
                                left_out=len(pool) - len(kept), among=len(pool)))
    return None if pool and not kept else kept


def distinct_patches(patches: Iterable[str]) -> dict[str, str]:
    """The non-empty patches by their stripped text (the key results are looked up by), each as given to apply:
    stripping can cut a hunk's last context line when it is blank, which `git apply` then refuses."""
    out: dict[str, str] = {}
    for patch in patches:
        if patch.strip():
            out.setdefault(patch.strip(), patch if patch.endswith("\n") else patch + "\n")
    return out


async def noop_patches(bench: Workbench, patches: Iterable[str]) -> dict[str, bool]:
    """Per distinct stripped patch, whether it changes no code (`swe.patch.changes_nothing`): the files it touches
    read in the sandbox at the base commit and on base + patch, no test run."""
    originals = distinct_patches(patches)
    touched = {p: touched_in_place(p) for p in originals}
    wanted = sorted({path for paths in touched.values() for path in paths or ()})
    base = await bench.base_files(wanted) if wanted else {}
    found: dict[str, bool] = {}
    for patch, paths in touched.items():
        try:
            after = await bench.files_at(originals[patch], paths) if paths else None
        except AgentflowError:  # it no longer applies: not shown to change nothing
            after = None
        found[patch] = after is not None and changes_nothing({p: base.get(p) for p in after}, after)
    return found


async def noop_check(bench: Workbench, state: Mapping[str, Any], patches: Iterable[str]
                     ) -> tuple[bool | None, dict[str, bool]]:
    """(whether the tests fail at the base commit, as the state's `base` says; per distinct stripped patch of
    `patches`, whether it changes no code). The patches are checked only when the tests fail at the base, where
    the check can leave a candidate out; otherwise only the submitted one is (`is_noop`)."""
    base_failed = tests_fail_at_base(state.get("base"))
    return base_failed, (await noop_patches(bench, patches) if base_failed else {})


async def is_noop(bench: Workbench, patch: str, noops: Mapping[str, bool] | None = None) -> bool:
    """Whether the submitted `patch` changes no code: as `noops` (from `noop_check`) says, or checked now."""
    key = patch.strip()
    if noops is None or key not in noops:
        noops = await noop_patches(bench, [patch])
    return noops.get(key, False)


def _vote_shares(pool: Sequence[Candidate], keys: Mapping[str, object]) -> dict[str, float]:
    """Per candidate, the share of the model's samples whose candidate has the same key (a part of a split edit
    is no sample of its own, nor a change made without a model: only the model's edits vote, unless there are
    none)."""
    voters = [keys[a.candidate_id] for a in pool if a.part_of is None and not a.mutant] or list(keys.values())
    return {cid: sum(1 for v in voters if v == key) / len(voters) for cid, key in keys.items()}
