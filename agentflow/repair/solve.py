"""Repair one task: localize -> (plan) -> edit -> test -> (critique) -> choose, under a search strategy.

The steps of one attempt live in `agentflow.repair.policy` (a search `Policy`); `agentflow.search` drives it:
`single` is best-of-1, `best-of-n` runs n chains of attempts at once, `mcts` searches the tree of attempts
(UCT, concurrent expansions). Every attempt that produced a patch is a candidate; the submitted one is chosen
by tests, then (blind mode) by a majority vote over normalised patches and an optional verifier model.
The patch is always taken from the workspace with test files stripped, whatever the model did.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from agentflow.budget import Budget, BudgetExceeded, BudgetLimits
from agentflow.errors import AgentflowError, ModelError, UserError
from agentflow.events import EventLog
from agentflow.models.base import ChatModel
from agentflow.models.batching import SampleBatcher
from agentflow.repair.choose import choose
from agentflow.repair.config import ModelLoader, RepairConfig
from agentflow.repair.outcome import Candidate, InstanceOutcome
from agentflow.repair.policy import RepairPolicy, RoleModels
from agentflow.repair.steps import edit_format_for, issue_text, make_plan, rank_suspects, write_reproduction
from agentflow.repair.workbench import Verification, Workbench
from agentflow.sandbox.base import Sandbox
from agentflow.swe.report import InstanceReport
from agentflow.swe.tasks import SWETask

# ---------------------------------------------------------------------------------------------- one task


def instance_model_spec(spec: str, instance_id: str) -> str:
    return spec.replace("{instance_id}", instance_id)


def _python_for(sandbox: Sandbox) -> str:
    return shlex.quote(sys.executable) if sandbox.info().backend == "local" else "python3"


class _TaskEvents(EventLog):
    """The run's event log as seen by one task's search: tree node ids get the instance id in front, so the
    trees of many tasks share one events file."""

    def __init__(self, inner: EventLog, instance_id: str) -> None:
        super().__init__(None, run_id=inner.run_id)
        self.inner, self.instance_id = inner, instance_id

    def emit(self, kind: str, /, *, node_id: str | None = None, parent_id: str | None = None, **data: Any) -> Any:
        prefix = f"{self.instance_id}/"
        return self.inner.emit(kind, node_id=prefix + node_id if node_id else node_id,
                               parent_id=prefix + parent_id if parent_id else parent_id,
                               instance_id=self.instance_id, **data)


async def _search(policy: RepairPolicy, cfg: RepairConfig, base: Verification, budget: Budget,
                  events: EventLog) -> None:
    from agentflow.search import MCTS, BestOfN, FunctionVerifier
    from agentflow.search.types import Verification as SearchVerification

    def value(cand: Any) -> SearchVerification:
        v = cand.state.data.get("verification")
        return SearchVerification(score=v.score, passed=v.passed) if isinstance(v, Verification) else SearchVerification()

    verifier = FunctionVerifier(value, name="tests")
    tree_events = _TaskEvents(events, policy.iid)
    root = policy.root(base)
    if cfg.strategy == "mcts":
        expansions = math.ceil(cfg.n * cfg.max_attempts / cfg.mcts_k)
        await MCTS(policy, verifier, k=cfg.mcts_k, concurrency=max(1, cfg.concurrency // cfg.mcts_k), c=cfg.mcts_c,
                   max_depth=cfg.max_attempts, max_expansions=expansions, stop_on_solution=cfg.stop_on_success,
                   seed=cfg.seed, charge_budget=False).run(root, budget=budget, events=tree_events)
        return
    n = cfg.n if cfg.strategy == "best-of-n" else 1
    await BestOfN(policy, verifier, n=n, concurrency=min(n, cfg.concurrency), seed=cfg.seed,
                  charge_budget=False).run(root, budget=budget, events=tree_events)


async def repair_task(
    task: SWETask,
    cfg: RepairConfig,
    *,
    events: EventLog,
    inst_dir: Path | None = None,
    model: ChatModel | None = None,
    model_loader: ModelLoader | None = None,
) -> InstanceOutcome:
    """Repair one task in a fresh sandbox; write candidates.jsonl, patch.diff and outcome.json into `inst_dir`.
    `model` replaces the coder's model; `model_loader` builds the models of the specs in `cfg`."""
    from agentflow.models.instrumented import InstrumentedModel
    from agentflow.models.spec import load_model
    from agentflow.sandbox import open_sandbox

    started = time.monotonic()
    iid = task.instance_id
    loader = model_loader or (lambda spec: load_model(spec, **cfg.model_options))
    if inst_dir is not None:
        inst_dir.mkdir(parents=True, exist_ok=True)
        (inst_dir / "candidates.jsonl").write_text("")
    budget = Budget(BudgetLimits(usd=cfg.budget_usd, model_calls=cfg.step_limit, wall_seconds=cfg.wall_time_s))
    outcome = InstanceOutcome(instance_id=iid, status="no_patch")
    events.emit("repair.start", node_id=iid, instance_id=iid, strategy=cfg.strategy, model=cfg.model)
    owned: list[ChatModel] = []

    def role(spec: str | None, enabled: bool, coder: ChatModel) -> ChatModel | None:
        if spec is None and not enabled:
            return None
        if spec is None:
            return coder
        inner = loader(instance_model_spec(spec, iid))
        owned.append(inner)
        return InstrumentedModel(inner, budget=budget, events=events, node_id=iid, check_budget=True)

    policy: RepairPolicy | None = None
    candidates: list[Candidate] = []

    def record(cand: Candidate) -> None:
        candidates.append(cand)
        if inst_dir is not None:
            with open(inst_dir / "candidates.jsonl", "a", encoding="utf-8") as fh:
                fh.write(cand.model_dump_json() + "\n")

    finished = False
    try:
        inner = model
        if inner is None:
            inner = loader(instance_model_spec(cfg.model, iid))
            owned.append(inner)
        cfg = cfg.model_copy(update={"edit_format": edit_format_for(cfg, inner)})
        if cfg.batch_samples > 1 and cfg.strategy != "single":
            inner = SampleBatcher(inner, max_n=cfg.batch_samples)
        coder = InstrumentedModel(inner, budget=budget, events=events, node_id=iid, check_budget=True)
        models = RoleModels(
            coder,
            planner=role(cfg.planner_model, cfg.plan, coder),
            critic=role(cfg.critic_model, cfg.critique, coder),
            verifier=role(cfg.verifier_model, False, coder),
        )
        try:
            sandbox_cm = open_sandbox(cfg.backend, cfg.sandbox, events=events)
            sandbox = await sandbox_cm.__aenter__()
            outcome.sandbox_backend = sandbox.info().backend
        except (AgentflowError, OSError) as exc:
            outcome.status, outcome.error = "env_error", f"sandbox: {exc}"
            finished = True
            return outcome
        try:
            bench = Workbench(sandbox, task, cfg, _python_for(sandbox))
            outcome.feedback = bench.mode
            try:
                await bench.setup()
                base = await bench.verify_base()
            except (AgentflowError, OSError) as exc:  # UserError included: a task that cannot be set up
                outcome.status, outcome.error = "env_error", f"setup: {exc}"
                finished = True
                return outcome
            issue = issue_text(task.problem_statement, task.hints_text)
            try:
                base, plan, prefer = await _prepare(bench, cfg, models, issue, base, outcome, events)
                policy = RepairPolicy(cfg, bench, models, budget, events, issue, record, plan=plan, prefer=prefer)
                events.emit("repair.base", node_id=iid, instance_id=iid, passed=base.passed, score=base.score,
                            feedback=bench.mode, reproduced=outcome.reproduced, edit_format=cfg.edit_format)
                await _search(policy, cfg, base, budget, events)
            except BudgetExceeded as exc:
                outcome.status, outcome.error = f"limits_exceeded:{exc.kind}", str(exc)
            except ModelError as exc:
                # the candidates found so far are kept; a task without any is an infrastructure failure
                # (bench --resume retries it)
                context = "context" in str(exc).lower()
                outcome.status = "context_exceeded" if context else "no_patch"
                outcome.error = f"{exc.__class__.__name__}: {exc}"
            if outcome.status == "no_patch" and (kind := budget.exceeded()) is not None:
                outcome.status = f"limits_exceeded:{kind}"
            attempts = policy.attempts if policy is not None else []
            if outcome.status == "no_patch" and outcome.error and not any(a.patch.strip() for a in attempts):
                outcome.status = "env_error"
            best, outcome.chosen_by = await choose(attempts, cfg, models.verifier, issue, budget, events)
            if best is not None:
                outcome.model_patch, outcome.chosen = best.patch, best.candidate_id
                final, report = await bench.verify(best.patch, final=True)
                outcome.verification = final
                if report is None:
                    report = InstanceReport(instance_id=iid, patch_exists=True, patch_successfully_applied=True,
                                            resolved=bool(final.passed), completed=final.passed is not None)
                outcome.report = report.model_dump(mode="json") | {"completed": report.completed}
                if outcome.status == "no_patch":
                    outcome.status = "submitted"
        finally:
            await sandbox_cm.__aexit__(None, None, None)
        finished = True
    except UserError:
        raise
    except AgentflowError as exc:
        if outcome.status == "no_patch" and policy is None:
            outcome.status = "env_error"
        outcome.error = f"{exc.__class__.__name__}: {exc}"
        finished = True
    finally:
        for owned_model in owned:
            with contextlib.suppress(Exception):  # closing must not hide the outcome
                await owned_model.aclose()
        outcome.candidates = sum(1 for c in candidates if c.status == "ok")
        outcome.samples = policy.samples if policy is not None else 0
        outcome.usage = budget.used.model_dump()
        outcome.duration_s = round(time.monotonic() - started, 3)
        events.emit("repair.end", node_id=iid, instance_id=iid, status=outcome.status, chosen=outcome.chosen,
                    chosen_by=outcome.chosen_by, resolved=(outcome.report or {}).get("resolved"), error=outcome.error)
        if inst_dir is not None and finished:  # an interrupted task leaves no outcome: resume redoes it
            (inst_dir / "patch.diff").write_text(outcome.model_patch)
            tmp = inst_dir / "outcome.json.tmp"
            tmp.write_text(json.dumps(outcome.model_dump(mode="json"), indent=2) + "\n")
            tmp.replace(inst_dir / "outcome.json")
    return outcome


async def _prepare(bench: Workbench, cfg: RepairConfig, models: RoleModels, issue: str, base: Verification,
                   outcome: InstanceOutcome, events: EventLog) -> tuple[Verification, str, list[tuple[str, str]]]:
    """The steps before the search: the coder's ranking of the suspects, a reproduction script (blind mode,
    when the repository's tests pass at the base commit) and the planner's plan. Returns the base
    verification (re-run with the script), the plan and the ranking ((path, function) pairs, best first)."""
    iid = bench.task.instance_id
    sources = await bench.python_sources()
    prefer: list[tuple[str, str]] = []
    if cfg.rank:
        prefer = await rank_suspects(models.coder, cfg, issue, sources, base.output, seed=cfg.seed)
        outcome.ranked = [f"{path}:{name}" for path, name in prefer]
        events.emit("repair.rank", node_id=iid, instance_id=iid, ranked=outcome.ranked)
    if bench.mode == "repo" and base.passed and cfg.reproduce and cfg.test_cmd is None:
        previous: tuple[str, str] | None = None
        for attempt in range(cfg.reproduce_attempts):
            script = await write_reproduction(models.coder, cfg, issue, sources, seed=cfg.seed + attempt,
                                              previous=previous, prefer=prefer)
            kept, output = await bench.install_repro(script) if script else (False, "no code block in the answer")
            outcome.reproduced = kept
            events.emit("repair.reproduce", node_id=iid, instance_id=iid, kept=kept, script=script,
                        output=output[-1500:])
            if kept:
                base = await bench.verify_base()
                break
            previous = (script or "", output)
    plan = ""
    if models.planner is not None:
        plan = await make_plan(models.planner, cfg, issue, sources, seed=cfg.seed, prefer=prefer)
        outcome.plan = plan
        events.emit("repair.plan", node_id=iid, instance_id=iid, plan=plan)
    return base, plan, prefer


def run_sync(coro: Any) -> Any:
    return asyncio.run(coro)
