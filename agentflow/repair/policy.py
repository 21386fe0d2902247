"""The repair attempt as a search policy (`agentflow.search.Policy`): best-of-N and MCTS drive it.

A node's state is a patch on the base commit plus the test feedback it got. `propose` samples k edits from a
node at once (the model decodes them together); an answer that changes nothing or cannot be read is recorded
and resampled, never counted. `apply` writes one edit into the shared workbench, takes the patch (test files
stripped), verifies it, and (with a critic) adds the critic's review to the feedback the next attempt sees.
`rollout` is one chain of attempts, each building on the best state so far.
"""

from __future__ import annotations

import ast
import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentflow.budget import Budget, CallSlots
from agentflow.events import EventLog
from agentflow.models.base import ChatModel, ChatRequest
from agentflow.repair.config import RepairConfig
from agentflow.repair.outcome import Candidate
from agentflow.repair.overlay import SourceOverlay
from agentflow.repair.steps import ReadEdits, critique, edit_prompt, first_text, read_edits, read_rewrite
from agentflow.repair.workbench import Verification, Workbench
from agentflow.search.protocols import RolloutContext
from agentflow.search.types import Action, NodeState


@dataclass
class RoleModels:
    """The model of each role (instrumented: they charge the task's budget and write `model.call` events)."""

    coder: ChatModel
    planner: ChatModel | None = None
    critic: ChatModel | None = None
    verifier: ChatModel | None = None


@dataclass
class Attempt:
    """An edit that produced a new patch (every one is a candidate for submission)."""

    candidate_id: str
    patch: str
    verification: Verification
    sample: int


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
        self.iid = bench.task.instance_id
        self.attempts: list[Attempt] = []
        self.samples = 0
        self.solved = False
        """A candidate passed its tests (with `stop_on_success`, no new samples are drawn)."""
        self._focus = 0
        self.calls = CallSlots(budget)
        """Model calls in flight, held against the model-call limit."""
        self._source_cache: dict[str, dict[str, str]] = {}

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

    async def _sample(self, state: NodeState, sources: dict[str, str], focus: int, ctx: RolloutContext) -> Action | None:
        cfg, hint = self.edit_cfg, ""
        parent_id = state.data["candidate_id"]
        for retry in range(cfg.noop_retries + 1):
            if self.solved and self.cfg.stop_on_success:
                return None
            with self.calls.hold():
                self.samples += 1
                sample = self.samples
                cand_id = f"{self.iid}/c{sample}"
                prompt = edit_prompt(cfg, sources, self.issue, state.data["feedback"], plan=self.plan, hint=hint,
                                     focus=focus + retry, prefer=self.prefer)
                model = self.models.coder
                with_node = getattr(model, "with_node", None)
                if cfg.edit_format == "tools":
                    text, finish, read = await self._edit_with_tools(prompt.messages[-1].content or "", sources,
                                                                     cand_id, sample, ctx)
                else:
                    request = ChatRequest(messages=prompt.messages, temperature=cfg.temperature,
                                          seed=cfg.seed + sample, max_tokens=prompt.max_tokens(cfg.max_tokens),
                                          stop=list(cfg.stop))
                    response = await (with_node(cand_id, parent_id) if with_node else model).chat(request)
                    ctx.usage.add_model(response.usage)
                    text, finish = first_text(response)
                    if prompt.window is not None:
                        read = read_rewrite(text, sources, prompt.window)
                    else:
                        read = read_edits(text, sources, prompt.focus_path, complete=finish != "length")
            if read.status == "ok":
                return Action(text=f"edit {cand_id}", data={
                    "candidate_id": cand_id, "files": read.files, "errors": read.errors, "answer": text,
                    "finish": finish, "sample": sample,
                })
            self._record_failed(cand_id, parent_id, read.status, read.errors, text, finish, sample)
            hint = (
                "Your previous answer did not change the code"
                + (f" ({'; '.join(read.errors[:2])})" if read.errors else "")
                + (". Copy the SEARCH lines exactly from the code shown and change them." if prompt.window is None
                   else ". Answer with the corrected code in one ```python block.")
            )
        return None

    async def _edit_with_tools(self, task: str, sources: dict[str, str], cand_id: str, sample: int,
                               ctx: RolloutContext) -> tuple[str, str, ReadEdits]:
        """One tool-calling edit: the coder works on an in-memory overlay of the sources with the editor
        tools (samples edit concurrently; the sandbox stays free); the files it changed are the edit."""
        from agentflow.agents.agent import Agent
        from agentflow.agents.config import AgentConfig
        from agentflow.tools.context import ToolContext

        cfg = self.edit_cfg
        overlay = SourceOverlay(sources)
        agent = Agent(AgentConfig(name="coder", tools=["editor"], step_limit=cfg.tool_steps,
                                  max_tokens=cfg.max_tokens, temperature=cfg.temperature, tool_protocol="native"),
                      model=self.models.coder)
        result = await agent.run(task, ctx=ToolContext(sandbox=overlay, events=self.events), budget=self.budget)
        ctx.usage.add_model(calls=max(1, result.usage.model_calls))  # every call of the edit's tool loop
        ctx.usage.tool_calls += result.usage.tool_calls
        text = str(getattr(result.output, "text", result.output) or "")
        finish = "stop" if result.stop_reason == "done" else result.stop_reason
        changed = {p: t for p, t in overlay.changed().items() if p in sources}
        if not changed:
            errors = [f"no file was changed ({result.stop_reason}{': ' + result.error if result.error else ''})"]
            return text, finish, ReadEdits("noop", errors=errors)
        for path, content in changed.items():
            try:
                ast.parse(content)
            except SyntaxError as exc:
                return text, finish, ReadEdits("apply_error",
                                               errors=[f"{path} does not parse after the edit: {exc.msg} (line {exc.lineno})"])
        self.events.emit("repair.tool_edit", node_id=cand_id, instance_id=self.iid, sample=sample,
                         steps=result.usage.model_calls, stop_reason=result.stop_reason, files=sorted(changed))
        return text, finish, ReadEdits("ok", changed)

    def _record_failed(self, cand_id: str, parent_id: str, status: str, errors: list[str], answer: str,
                       finish: str, sample: int) -> None:
        self.record(Candidate(instance_id=self.iid, candidate_id=cand_id, parent_id=parent_id, status=status,  # type: ignore[arg-type]
                              edit_errors=errors, finish_reason=finish, sample=sample, answer=answer[:4000]))
        self.events.emit("repair.resample", node_id=cand_id, parent_id=parent_id, instance_id=self.iid,
                         status=status, errors=errors[:3])

    # --------------------------------------------------------------------------------------- the Policy protocol

    async def propose(self, state: NodeState, k: int, ctx: RolloutContext) -> list[Action]:
        sources = await self.sources_at(state.data["patch"])
        # the k samples of one expansion share a prompt (one request with n=k where the model batches);
        # successive expansions and chains rotate over the suspects
        focus, self._focus = self._focus, self._focus + 1
        found = await asyncio.gather(*(self._sample(state, sources, focus, ctx) for _ in range(k)),
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
            started = time.monotonic()  # after the lock: the attempt's own time, for its trace span
            await self.bench.restore(parent_patch)
            for path, content in d["files"].items():
                await self.bench.sandbox.write_file(path, content)
            patch, dropped = await self.bench.diff()
            if patch.strip() == parent_patch.strip():  # it only touched test files, which are stripped
                self._record_failed(d["candidate_id"], state.data["candidate_id"], "noop",
                                    ["only test files changed"] + d["errors"], d["answer"], d["finish"], d["sample"])
                return state.child(done=True, output=None, data={**state.data, "noop": True})
            verification, _ = await self.bench.verify(patch)
        feedback = verification.output
        review_cfg = self.critique_cfg
        if (verification.passed is not True and review_cfg is not None and self.models.critic is not None
                and self.cfg.max_attempts > 1):
            review = await critique(self.models.critic, review_cfg, self.issue, patch, verification.output,
                                    seed=review_cfg.seed + d["sample"])
            ctx.usage.add_model()
            feedback = (feedback + "\n\n" if feedback else "") + f"Reviewer's notes on this change:\n{review}"
        self.attempts.append(Attempt(d["candidate_id"], patch, verification, d["sample"]))
        self.record(Candidate(
            instance_id=self.iid, candidate_id=d["candidate_id"], parent_id=state.data["candidate_id"], status="ok",
            patch=patch, dropped_test_files=dropped, edit_errors=d["errors"], verification=verification,
            finish_reason=d["finish"], sample=d["sample"], answer=d["answer"][:4000],
        ))
        self.events.emit("repair.attempt", node_id=d["candidate_id"], parent_id=state.data["candidate_id"],
                         instance_id=self.iid, value=verification.score, passed=verification.passed,
                         dropped_test_files=dropped, duration_s=round(time.monotonic() - started, 4))
        if verification.passed:
            self.solved = True
        done = bool(verification.passed) or state.depth + 1 >= self.cfg.max_attempts
        return state.child(done=done, output=patch, data={
            "patch": patch, "feedback": feedback, "verification": verification, "candidate_id": d["candidate_id"],
        })

    async def rollout(self, state: NodeState, ctx: RolloutContext) -> NodeState:
        """One chain of attempts; each builds on the best state so far (an edit that broke more tests is not
        built upon). Returns the chain's best state, finished."""
        node = best = state
        for _ in range(self.cfg.max_attempts):
            if ctx.exceeded() is not None:
                break
            actions = await self.propose(node, 1, ctx)
            if not actions:
                break
            child = await self.apply(node, actions[0], ctx)
            if child.data.get("noop"):
                continue
            if child.data["verification"].passed:
                return child
            if self.score(child) >= self.score(node):
                node = child
            if best is state or self.score(child) > self.score(best):
                best = child
        if best is state:
            return state.child(done=True, output=None)
        best.done = True
        return best
