"""The repair attempt as a search policy (`agentflow.search.Policy`): best-of-N and MCTS drive it.

A node's state is a patch on the base commit plus the test feedback it got. `propose` samples k edits from a
node at once (the model decodes them together); an answer that changes nothing or cannot be read is recorded
and resampled, never counted. `apply` writes one edit into the shared workbench, takes the patch (test files
stripped), verifies it, and (with a critic) adds the critic's review to the feedback the next attempt sees.
`rollout` is one chain of attempts, each building on the best state so far; with `examples_retries`, an edit
that leaves what the issue's examples show as it was is drawn again from where it started, told so.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from agentflow.budget import Budget, CallSlots
from agentflow.events import EventLog
from agentflow.reasoning.value import ValueJudgement
from agentflow.repair.config import RepairConfig
from agentflow.repair.edits import edit_parts
from agentflow.repair.focus import FocusSchedule, window_key
from agentflow.repair.localize import RunEvidence, Window
from agentflow.repair.outcome import Attempt, Candidate
from agentflow.repair.runtime import RoleModels
from agentflow.repair.sampling import draw_edit, retry_hint
from agentflow.repair.spectrum import ExampleRun, examples_comparable, examples_reach_code
from agentflow.repair.steps import critique, edit_prompt, examples_hint, suspects
from agentflow.repair.value import judge_attempt
from agentflow.repair.workbench import Verification, Workbench
from agentflow.search.protocols import RolloutContext
from agentflow.search.types import Action, NodeState


class RepairPolicy:
    """See the module docstring. `attempts` collects every verified edit, whatever the strategy."""

    def __init__(
        self,
        cfg: RepairConfig,
        bench: Workbench,
        models: RoleModels,
        budget: Budget,
        events: EventLog,
        issue: str,
        record: Callable[[Candidate], None],
        *,
        plan: str = "",
        prefer: list[tuple[str, str]] | None = None,
        evidence: RunEvidence | None = None,
        edit_cfg: RepairConfig | None = None,
        critique_cfg: RepairConfig | None = None,
    ) -> None:
        self.cfg, self.bench, self.models, self.budget, self.events = cfg, bench, models, budget, events
        self.edit_cfg = edit_cfg or cfg
        """Settings of the rollout's edit step (its node's settings over the run's)."""
        self.critique_cfg = critique_cfg
        """Settings of the rollout's critique step; None when the rollout has none."""
        self.issue, self.record, self.plan = issue, record, plan
        self.prefer = prefer or []
        """The coder's ranking of the suspects, (path, function) best first."""
        self.evidence = evidence
        """What running the issue's examples and the tests showed (`swe.spectrum`), for the suspects."""
        self.iid = bench.task.instance_id
        self.attempts: list[Attempt] = []
        self.samples = 0
        self.solved = False
        """A candidate passed its tests (with `stop_on_success`, no new samples are drawn)."""
        self.focus = FocusSchedule()
        """Which suspect each sample rewrites: shares that turn down windows the model left alone."""
        self.calls = CallSlots(budget)
        """Model calls in flight, held against the model-call limit."""
        self._source_cache: dict[str, dict[str, str]] = {}
        self._examples_before: ExampleRun | None = None
        """The unchanged code's examples when they can tell a change (`examples_comparable`)."""
        self._examples_checked = False
        self._examples_lock = asyncio.Lock()

    # --------------------------------------------------------------------------------------- states

    def root(self, base: Verification) -> NodeState:
        return NodeState(data={"patch": "", "feedback": base.output, "verification": base,
                               "candidate_id": f"{self.iid}/root"})

    @staticmethod
    def score(state: NodeState) -> float:
        v = state.data.get("verification")
        return v.score if isinstance(v, Verification) else 0.0

    # --------------------------------------------------------------------------------------- sampling

    async def sources_at(self, patch: str) -> dict[str, str]:
        """The Python sources with `patch` applied, cached per patch: chains that start from one state then ask
        for their samples at the same moment, so a SampleBatcher can send those of one prompt together."""
        if patch in self._source_cache:
            return self._source_cache[patch]
        async with self.bench.lock:
            if patch not in self._source_cache:
                await self.bench.restore(patch)
                if len(self._source_cache) >= 16:
                    self._source_cache.pop(next(iter(self._source_cache)))
                self._source_cache[patch] = await self.bench.python_sources()
            return self._source_cache[patch]

    def ranked_windows(self, state: NodeState, sources: dict[str, str]) -> list[Window]:
        """The suspects of `state` (its test output counts), best first, before any sample's choice among them."""
        return suspects(self.edit_cfg, sources, self.issue, state.data["feedback"], focus=0, prefer=self.prefer,
                        evidence=self.evidence)

    async def _sample(self, state: NodeState, sources: dict[str, str], windows: list[Window],
                      ctx: RolloutContext, hint: str = "") -> Action | None:
        """One edit sample on `windows` (the first is the one to rewrite): an answer that changes nothing or cannot
        be read is recorded and sampled again (`noop_retries`), on another window when it gave this one back.
        `hint` goes into the prompt (what an earlier try showed)."""
        cfg = self.edit_cfg
        parent_id = state.data["candidate_id"]
        for _ in range(cfg.noop_retries + 1):
            if self.solved and self.cfg.stop_on_success:
                return None
            with self.calls.hold():
                self.samples += 1
                sample = self.samples
                cand_id = f"{self.iid}/c{sample}"
                prompt = edit_prompt(cfg, sources, self.issue, state.data["feedback"], plan=self.plan, hint=hint,
                                     windows=windows)
                drawn = await draw_edit(self.models.coder, cfg, prompt, sources, cand_id=cand_id, parent_id=parent_id,
                                        sample=sample, events=self.events, budget=self.budget, iid=self.iid)
                ctx.usage.add_model(drawn.usage, calls=drawn.model_calls)
                ctx.usage.tool_calls += drawn.tool_calls
                text, finish, read = drawn.text, drawn.finish, drawn.read
            shown = window_key(windows[0]) if windows else ""
            if read.status == "ok":
                return Action(text=f"edit {cand_id}", data={
                    "candidate_id": cand_id, "files": read.files, "errors": read.errors, "answer": text,
                    "finish": finish, "sample": sample, "window": shown,
                })
            self._record_failed(cand_id, parent_id, read.status, read.errors, text, finish, sample, shown)
            if read.declined and prompt.window is not None:
                # the model looked at this window and found nothing to change: the next try looks elsewhere
                # (otherwise a model that gives the issue's example back for a wrong window is asked again and
                # again about that same window)
                self.focus.decline(prompt.window)
                windows, hint = self.focus.pick(windows), ""
                if windows[0] != prompt.window:
                    continue
            hint = retry_hint(read, prompt)
        return None

    def _record_failed(self, cand_id: str, parent_id: str, status: str, errors: list[str], answer: str,
                       finish: str, sample: int, window: str = "") -> None:
        self.record(Candidate(instance_id=self.iid, candidate_id=cand_id, parent_id=parent_id, status=status,  # type: ignore[arg-type]
                              edit_errors=errors, finish_reason=finish, sample=sample, answer=answer[:4000],
                              window=window))
        self.events.emit("repair.resample", node_id=cand_id, parent_id=parent_id, instance_id=self.iid,
                         status=status, errors=errors[:3])

    # --------------------------------------------------------------------------------------- the Policy protocol

    async def propose(self, state: NodeState, k: int, ctx: RolloutContext, hint: str = "") -> list[Action]:
        sources = await self.sources_at(state.data["patch"])
        # the k samples of one expansion share a prompt (one request with n=k where the model batches);
        # successive expansions and chains share out the suspects (`FocusSchedule`)
        windows = self.focus.pick(self.ranked_windows(state, sources), k)
        found = await asyncio.gather(*(self._sample(state, sources, windows, ctx, hint) for _ in range(k)),
                                     return_exceptions=True)
        errors = [f for f in found if isinstance(f, BaseException)]
        actions = [f for f in found if isinstance(f, Action)]
        if errors and not actions:
            raise errors[0]
        for exc in errors:  # the other samples are usable: go on with them, but leave a trace
            self.events.emit("repair.sample_error", node_id=state.data["candidate_id"], instance_id=self.iid,
                             error=f"{type(exc).__name__}: {exc}")
        return actions

    async def apply(self, state: NodeState, action: Action, ctx: RolloutContext) -> NodeState:
        d: dict[str, Any] = action.data
        parent_patch = state.data["patch"]
        async with self.bench.lock:
            tried = await self.bench.verify_files(parent_patch, d["files"])
        if tried is None:  # it only touched test files, which are stripped
            self._record_failed(d["candidate_id"], state.data["candidate_id"], "noop",
                                ["only test files changed"] + d["errors"], d["answer"], d["finish"], d["sample"],
                                d.get("window", ""))
            return state.child(done=True, output=None, data={**state.data, "noop": True})
        patch, dropped, verification, started = tried
        feedback = verification.output
        review_cfg = self.critique_cfg
        if (verification.passed is not True and review_cfg is not None and self.models.critic is not None
                and self.cfg.max_attempts > 1):
            review = await critique(self.models.critic, review_cfg, self.issue, patch, verification.output,
                                    seed=review_cfg.seed + d["sample"])
            ctx.usage.add_model()
            feedback = (feedback + "\n\n" if feedback else "") + f"Reviewer's notes on this change:\n{review}"
        self._add_attempt(state, d, d["candidate_id"], patch, dropped, verification, started)
        unchanged = await self._examples_unchanged(patch) if verification.passed is not True else None
        if unchanged is not None:
            self.events.emit("repair.examples_unchanged", node_id=d["candidate_id"], instance_id=self.iid,
                             shown=unchanged[:500])
            feedback = (feedback + "\n\n" if feedback else "") + (
                f"Run with this change, the issue's example still shows what it showed before:\n{unchanged[:800]}")
        chosen = {"patch": patch, "feedback": feedback, "verification": verification, "candidate_id": d["candidate_id"],
                  "examples_unchanged": unchanged}
        if not verification.passed:
            chosen = await self._try_parts(state, d) or chosen
        verification = chosen["verification"]
        if verification.passed:
            self.solved = True
        done = bool(verification.passed) or state.depth + 1 >= self.cfg.max_attempts
        return state.child(done=done, output=chosen["patch"], data=chosen)

    async def _examples_unchanged(self, patch: str) -> str | None:
        """What the issue's examples show when they show on base + `patch` what they showed on the unchanged
        code; None when they show something else, or cannot tell (`spectrum.examples_changed`), or
        `examples_retries` is off. Runs in the sandbox, no model call."""
        if not self.edit_cfg.examples_retries:
            return None
        sources = await self.sources_at("")
        async with self._examples_lock:  # the unchanged code's examples run once (twice: are they stable?)
            if not self._examples_checked:
                base = await self.bench.show_examples("", self.issue, sources)
                if examples_reach_code(base):  # else the second run is spared: nothing to compare
                    again = await self.bench.show_examples("", self.issue, sources)
                    self._examples_before = base if examples_comparable(base, again) else None
                self._examples_checked = True
        before = self._examples_before
        if before is None:
            return None
        run = await self.bench.show_examples(patch + "\n", self.issue, sources)
        if run.problem or not run.shown or run.shown != before.shown:
            return None  # something else shown, or no report (which `examples_changed` counts as unchanged)
        return "".join(before.shown)

    def _add_attempt(self, state: NodeState, d: dict[str, Any], cand_id: str, patch: str, dropped: list[str],
                     verification: Verification, started: float, part_of: str | None = None) -> None:
        self.attempts.append(Attempt(cand_id, patch, verification, d["sample"], part_of))
        self.record(Candidate(
            instance_id=self.iid, candidate_id=cand_id, parent_id=state.data["candidate_id"], status="ok",
            patch=patch, dropped_test_files=dropped, edit_errors=d["errors"], verification=verification,
            finish_reason=d["finish"], sample=d["sample"], answer=d["answer"][:4000] if part_of is None else "",
            part_of=part_of, window=d.get("window", "") if part_of is None else "",
        ))
        self.events.emit("repair.attempt", node_id=cand_id, parent_id=state.data["candidate_id"],
                         instance_id=self.iid, value=verification.score, passed=verification.passed,
                         dropped_test_files=dropped, duration_s=round(time.monotonic() - started, 4),
                         part_of=part_of)

    async def _try_parts(self, state: NodeState, d: dict[str, Any]) -> dict[str, Any] | None:
        """An edit that failed and changed several places: each change alone is a candidate too (no model
        call; `split_edits`). The first part that passes is the attempt's result; None when none does."""
        if not self.edit_cfg.split_edits:
            return None
        sources = await self.sources_at(state.data["patch"])
        seen = {a.patch.strip() for a in self.attempts}
        for number, files in enumerate(edit_parts(sources, d["files"], limit=self.edit_cfg.split_edits_limit), 1):
            async with self.bench.lock:
                tried = await self.bench.verify_files(state.data["patch"], files)
            if tried is None or tried[0].strip() in seen:
                continue
            patch, dropped, verification, started = tried
            seen.add(patch.strip())
            part_id = f"{d['candidate_id']}.{number}"
            self._add_attempt(state, d, part_id, patch, dropped, verification, started, part_of=d["candidate_id"])
            if verification.passed:
                return {"patch": patch, "feedback": verification.output, "verification": verification,
                        "candidate_id": part_id}
        return None

    async def rollout(self, state: NodeState, ctx: RolloutContext) -> NodeState:
        """One chain of attempts; each builds on the best state so far (an edit that broke more tests is not
        built upon). Returns the chain's best state, finished."""
        node = best = state
        attempts = retries = 0
        hint = ""
        while attempts < self.cfg.max_attempts:
            if ctx.exceeded() is not None:
                break
            actions = await self.propose(node, 1, ctx, hint)
            if not actions:
                break
            child = await self.apply(node, actions[0], ctx)
            hint = ""
            if child.data.get("noop"):
                attempts += 1
                continue
            if child.data["verification"].passed:
                return child
            if best is state or self.score(child) > self.score(best):
                best = child
            unchanged = child.data.get("examples_unchanged")
            if unchanged is not None and retries < self.edit_cfg.examples_retries:
                # the edit left the report's behaviour as it was: drawn again from the same state, told so
                retries += 1
                hint = examples_hint(child.data["patch"], unchanged)
                continue
            attempts += 1
            if self.score(child) >= self.score(node):
                node = child
        if best is state:
            return state.child(done=True, output=None)
        best.done = True
        return best


class ValuedRepairPolicy(RepairPolicy):
    """`RepairPolicy` whose attempts are valued by the value agent after their tests (the `swe.value` step)."""

    def __init__(self, *args: Any, value_cfg: RepairConfig, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.value_cfg = value_cfg
        self.judged: dict[str, ValueJudgement] = {}
        """Candidate id -> the value agent's judgement of it."""

    async def apply(self, state: NodeState, action: Action, ctx: RolloutContext) -> NodeState:
        child = await super().apply(state, action, ctx)
        verification = child.data.get("verification")
        if child.data.get("noop") or not isinstance(verification, Verification) or verification.passed is True:
            return child  # nothing new to value, or the tests decided already
        cfg, cand_id = self.value_cfg, child.data["candidate_id"]
        with self.calls.hold():  # held against the call limit with the edit samples in flight
            judgement = await judge_attempt(self.models.critic or self.models.coder, cfg, self.issue,
                                            child.data["patch"], verification,
                                            seed=cfg.seed + int(action.data.get("sample", 0)))
        ctx.usage.add_model()
        self.judged[cand_id] = judgement
        value = verification.score if judgement.value is None else judgement.value
        data = dict(child.data)
        data["value"] = round(cfg.value_weight * value + (1 - cfg.value_weight) * verification.score, 4)
        # in front of the test output: an edit prompt keeps only the feedback's first part
        shown = f" (value {round(judgement.value * 100)}/100)" if judgement.value is not None else ""
        data["feedback"] = f"A reviewer's assessment of the current change{shown}:\n{judgement.assessment}\n\n" + str(
            data.get("feedback") or "")
        child.data = data
        self.events.emit("repair.value", node_id=cand_id, instance_id=self.iid, value=judgement.value,
                         search_value=data["value"], assessment=judgement.assessment)
        return child
