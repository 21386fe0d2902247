"""Repair one task by running the repair workflow (`workflows/repair.yaml`, or the run's `workflow`) on the
graph engine, with what no node owns around it: the role models, the sandbox, the budget, and the task's files
(outcome.json, patch.diff, candidates.jsonl).

A checkpoint after every node (`checkpoints.db` in the task's folder) lets a killed task resume at the node where
it stopped; inside it, completed seeded model calls come from the call journal (`calls.db`) and a graph search
takes its finished branches as they were. The task's candidates are those its checkpoints hold
(`state.checkpointed_candidates`): a node a kill cut short makes its own again under the same ids.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from agentflow.budget import Budget, BudgetExceeded, BudgetLimits, CallTime
from agentflow.errors import AgentflowError, ModelError, UserError
from agentflow.events import EventLog
from agentflow.events.kinds import (
    RepairEnd,
    RepairPreflight,
    RepairResume,
    RepairSearch,
    RepairStart,
    RepairStatus,
    RepairTestTime,
)
from agentflow.graph.compile.nodetypes import NodeTypeRegistry
from agentflow.graph.define.spec import WorkflowSpec
from agentflow.graph.search.settings import SearchSettings
from agentflow.models.base import ChatModel
from agentflow.models.batching import SampleBatcher
from agentflow.models.cache import ResponseCache
from agentflow.repair.config import ALL_NODES, ModelLoader, RepairConfig, task_sandbox_config, with_setting
from agentflow.repair.edit.steps import edit_format_for, issue_text
from agentflow.repair.nodetypes.runtime import RepairRuntime, RoleModels, TaskEvents
from agentflow.repair.nodetypes.state import checkpointed_candidates
from agentflow.repair.nodetypes.trajectory import trajectories_stop
from agentflow.repair.outcome import Candidate, InstanceOutcome
from agentflow.repair.run.progress import expected_calls
from agentflow.repair.run.workflow_settings import (
    attempt_searches,
    give_settings,
    graph_searches,
    node_settings_for,
    require_search,
    search_summary,
    searches_for_failing_tests,
    set_graph_searches,
)
from agentflow.repair.verify.choose import is_noop, leave_out_noops, noop_check, tests_fail_at_base, tests_key
from agentflow.repair.verify.testshare import WallPlan
from agentflow.repair.verify.workbench import Workbench
from agentflow.rundir import RunDir
from agentflow.runfiles import replace_file
from agentflow.sandbox.base import Sandbox
from agentflow.secrets import redact
from agentflow.swe.preflight import Preflight
from agentflow.swe.tasks import SWETask

if TYPE_CHECKING:
    from agentflow.sandbox.session import AgentSandbox

THREAD = "repair"
"""The graph thread of a task's repair in its own checkpoint file."""
CALLS_FILE = "calls.db"
"""A task's journal of seeded model calls in its folder: a resumed task takes completed calls from it."""
CANDIDATES_FILE = "candidates.jsonl"


def _python_for(sandbox: Sandbox) -> str:
    return shlex.quote(sys.executable) if sandbox.info().backend == "local" else "python3"


class RepairWorkflow(NamedTuple):
    """The run's repair workflow, loaded and validated once for all its tasks (`load_repair_workflow`)."""

    spec: WorkflowSpec
    """The workflow, the run's settings handed to its typed nodes (`workflow_settings`)."""
    registry: NodeTypeRegistry
    """The node types it uses."""
    node_settings: dict[str, dict[str, Any]]
    """Every typed node's own settings (the workflow's, then `-c nodes.<node>.*`)."""


def load_repair_workflow(cfg: RepairConfig) -> RepairWorkflow:
    """The run's workflow (validated once) with the run's settings handed to its nodes (`workflow_settings`), its
    node-type registry and every typed node's own settings."""
    from agentflow.graph.check.validation import check_workflow
    from agentflow.graph.compile.compiler import registry_for
    from agentflow.graph.define.loader import load_workflow
    from agentflow.graph.run.context import RunHandles

    spec = load_workflow(cfg.workflow)
    registry = registry_for(spec, RunHandles())
    overrides = set_graph_searches(spec, cfg, {name: dict(values) for name, values in cfg.nodes.items()})
    require_search(spec, cfg)
    check_workflow(spec, registry)
    node_settings = node_settings_for(spec, registry, overrides)
    give_settings(spec, registry, cfg, node_settings)
    return RepairWorkflow(spec, registry, node_settings)


def effective_strategy(cfg: RepairConfig, workflow: RepairWorkflow) -> RepairConfig:
    """`cfg` saying exactly what the workflow's graph search nodes do (under `nodes:`, no `strategy` left), so a
    run's config.resolved.yaml repeats it; unchanged when there is none, or when each task's search depends on
    its pre-flight."""
    spec = workflow.spec
    names = graph_searches(spec)
    if not names or searches_for_failing_tests(spec, cfg) is not None:
        return cfg
    nodes = {**cfg.nodes, **{name: dict(spec.nodes[name].search or {}) for name in names}}
    return with_setting(cfg, "search.strategy", None).model_copy(update={"nodes": nodes})


async def repair_task(
    task: SWETask,
    cfg: RepairConfig,
    *,
    events: EventLog,
    inst_dir: Path | None = None,
    model: ChatModel | None = None,
    model_loader: ModelLoader | None = None,
    workflow: RepairWorkflow | None = None,
    run_budget: Budget | None = None,
    stop_on_preflight: bool = True,
    earlier_calls: CallTime | None = None,
) -> InstanceOutcome:
    """Repair one task in a fresh sandbox, writing candidates.jsonl, patch.diff, outcome.json and the checkpoints
    into `inst_dir` (an unfinished run there is continued). `model` replaces the coder's; `model_loader` builds
    the models of `cfg`'s specs; `workflow`: `load_repair_workflow(cfg)`, when loaded already; `run_budget` is
    charged too. `stop_on_preflight`: tests that cannot run raise instead of ending as an `env_error`.
    `earlier_calls`: the model calls of the run's tasks finished so far, the pace the task's expected wall time
    is planned at before its own first call (`testshare.WallPlan`)."""
    started = time.monotonic()
    iid = task.instance_id
    spec, registry, node_settings = workflow or load_repair_workflow(cfg)
    if inst_dir is not None:
        inst_dir.mkdir(parents=True, exist_ok=True)
    budget = Budget(BudgetLimits(usd=cfg.limits.budget_usd, model_calls=cfg.limits.step_limit, wall_seconds=cfg.limits.wall_time_s),
                    parent=run_budget)
    events.write(RepairStart(node_id=iid, instance_id=iid, search=search_summary(spec), model=cfg.model,
                             workflow=spec.name, expected_calls=expected_calls(cfg, spec, registry),
                             step_limit=cfg.limits.step_limit, wall_time_s=cfg.limits.wall_time_s))
    run = _TaskRun(task, cfg, spec, node_settings, registry, events, budget,
                   InstanceOutcome(instance_id=iid, status=RepairStatus.NO_PATCH), inst_dir,
                   earlier_calls=earlier_calls or CallTime())
    owned: list[ChatModel] = []
    finished = False
    calls: ResponseCache | None = None
    try:
        if inst_dir is not None:
            calls = ResponseCache(inst_dir / CALLS_FILE)
        models, run.cfg = _role_models(cfg, spec, node_settings, iid, budget, events, model, model_loader, owned,
                                       calls)
        try:
            from agentflow.sandbox import open_sandbox

            sandbox_cm = open_sandbox(run.cfg.backend, task_sandbox_config(run.cfg), events=TaskEvents(events, iid))
            sandbox = await sandbox_cm.__aenter__()
            run.outcome.sandbox_backend = sandbox.info().backend
        except (AgentflowError, OSError) as exc:
            run.outcome.status, run.outcome.error = RepairStatus.ENV_ERROR, f"sandbox: {exc}"
            finished = True
            return run.outcome
        try:
            await _repair_in(run, sandbox, models, stop_on_preflight)
        finally:
            await sandbox_cm.__aexit__(None, None, None)
        finished = True
    except UserError:
        raise
    except AgentflowError as exc:
        if (current := asyncio.current_task()) is not None and current.cancelling() > 0:
            # an interrupt under way (Ctrl-C) can surface as an error of what it cut (a sandbox link closed
            # mid-command) instead of the cancellation: the task did not end, so no outcome is written and a
            # resume continues it
            raise asyncio.CancelledError from exc
        if run.outcome.status is RepairStatus.NO_PATCH and not run.state.get("attempts"):
            run.outcome.status = RepairStatus.ENV_ERROR
        run.outcome.error = f"{exc.__class__.__name__}: {exc}"
        finished = True
    finally:
        for owned_model in owned:
            with contextlib.suppress(Exception):  # closing must not hide the outcome
                await owned_model.aclose()
        if calls is not None:
            calls.close()
        _end_task(run, time.monotonic() - started, write=finished)
    return run.outcome


@dataclasses.dataclass
class _TaskRun:
    """One task's repair under way: what it works with and how far it got, however the repair ends."""

    task: SWETask
    cfg: RepairConfig
    """The run's settings, with `edit_format: auto` resolved for the coder once the models are made."""
    spec: WorkflowSpec
    """The workflow; its search as `strategy_when_tests_fail` says once the pre-flight found failing tests."""
    node_settings: dict[str, dict[str, Any]]
    registry: NodeTypeRegistry
    events: EventLog
    budget: Budget
    outcome: InstanceOutcome
    inst_dir: Path | None
    earlier_calls: CallTime = dataclasses.field(default_factory=CallTime)
    """The run's finished tasks' model calls (their pace plans this task's test time before its first call)."""
    rt: RepairRuntime | None = None
    """The nodes' runtime, once the pre-flight passed."""
    state: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The workflow's final state once it ran (cut by a limit or an error: its last checkpoint's)."""
    candidates: list[Candidate] = dataclasses.field(default_factory=list)
    """The task's candidates, as its checkpoints hold them once the workflow ran (`checkpointed_candidates`)."""


def _search_for_failing_tests(run: _TaskRun) -> None:
    """Tests fail at the base commit: the workflow's search as `strategy_when_tests_fail` says (a decision event)."""
    switched = searches_for_failing_tests(run.spec, run.cfg)
    if switched is None:
        return
    run.spec = switched
    iid = run.task.instance_id
    run.events.write(RepairSearch(node_id=iid, instance_id=iid, search=search_summary(switched),
                                  why="the tests fail at the base commit",
                                  expected_calls=expected_calls(run.cfg, switched, run.registry)))


async def _repair_in(run: _TaskRun, sandbox: AgentSandbox, models: RoleModels, stop_on_preflight: bool) -> None:
    """The task's repository set up in `sandbox`, the pre-flight, the repair workflow: `run.outcome` says how."""
    outcome, events = run.outcome, run.events
    plan = WallPlan(run.budget, run.cfg.limits.wall_time_s, run.cfg.tests.model_call_s, run.earlier_calls)
    bench = Workbench(sandbox, run.task, run.cfg, _python_for(sandbox), plan=plan)
    outcome.feedback = bench.mode
    iid = run.task.instance_id
    # a test run shortened or timed out for the test-time share is an event and a progress line, never silent
    bench.test_share.reporter = lambda found: events.write(RepairTestTime(node_id=iid, instance_id=iid, **found))
    try:
        await bench.setup()
        if graph_searches(run.spec):  # what a branch's recorded workspace diff is taken against
            await sandbox.set_base()
    except (AgentflowError, OSError) as exc:  # UserError included: a task that cannot be set up
        outcome.status, outcome.error = RepairStatus.ENV_ERROR, f"setup: {exc}"
        return
    try:
        found = await preflight(bench, events)
    except TestsCannotRun as exc:
        outcome.preflight = exc.found.model_dump(mode="json")  # a timeout included: the record says what ran
        if stop_on_preflight:  # the run is this one task: stop before any model call, one line
            raise
        # one task of a batch: the others go on; the task is reported with the cause (and retried by --resume,
        # like every env_error, once the user has fixed it)
        outcome.status, outcome.error = RepairStatus.ENV_ERROR, f"pre-flight: {exc}"
        return
    outcome.preflight = found.model_dump(mode="json") if found is not None else None
    if found is not None and found.tests_fail:
        _search_for_failing_tests(run)
    run.rt = RepairRuntime(run.cfg, bench, models, run.budget, events,
                           issue_text(run.task.problem_statement, run.task.hints_text))
    try:
        await _run_graph(run, run.rt)
    except BudgetExceeded as exc:
        outcome.limits_exceeded(exc.kind)
        outcome.error = str(exc)
    except ModelError as exc:
        outcome.status = RepairStatus.CONTEXT_EXCEEDED if "context" in str(exc).lower() else RepairStatus.ENV_ERROR
        outcome.error = f"{exc.__class__.__name__}: {exc}"
    _fill_outcome(outcome, run.state, run.budget)
    # cut before its choice (a choice that declined to submit, `chosen_by: noop`, stands)
    if outcome.status is RepairStatus.LIMITS_EXCEEDED and not outcome.model_patch and outcome.chosen_by is None:
        await _submit_best_so_far(outcome, run.candidates, bench, run.state, events)


def _end_task(run: _TaskRun, duration_s: float, *, write: bool) -> None:
    """The outcome's accounting, the task's `repair.end` event, and when it ran to an end (`write`; an
    interrupted task leaves no outcome: a resume continues it) its files."""
    outcome, state = run.outcome, run.state
    outcome.candidates = sum(1 for c in run.candidates if c.status == "ok")
    outcome.samples = int(state.get("samples") or len(state.get("drawn") or []))
    outcome.usage = run.budget.used.model_dump()
    outcome.call_time = run.budget.timed()
    outcome.duration_s = round(duration_s, 3)
    if run.rt is not None:
        outcome.test_seconds = round(run.rt.bench.test_time.total_s, 3)
        outcome.longest_test_wait_s = round(run.rt.bench.test_time.longest_s, 3)
        outcome.base_test_seconds = base.seconds if (base := state.get("base")) else None
    iid = outcome.instance_id
    # an interrupted task says so: its outcome (still the initial `no_patch`) is not how it ended
    run.events.write(RepairEnd(node_id=iid, instance_id=iid,
                               status=outcome.status if write else RepairStatus.INTERRUPTED,
                               limit=outcome.limit if write else None, finished=write, chosen=outcome.chosen,
                               chosen_by=outcome.chosen_by, resolved=(outcome.report or {}).get("resolved"),
                               error=outcome.error))
    if run.inst_dir is not None and write:
        write_candidates(run.inst_dir, run.candidates)
        task_dir = RunDir(run.inst_dir)
        task_dir.write_text("patch.diff", outcome.model_patch, code=True)
        task_dir.write_json("outcome.json", outcome.model_dump(mode="json"), indent=2)


def write_candidates(inst_dir: Path, candidates: list[Candidate]) -> None:
    """The task's candidates.jsonl, a view of its candidates (one JSON line each; replaced whole, never through a
    link the run folder brings). The value agent's judgement is the state's, for the choice: not a column."""
    rows = (redact(c.model_dump(mode="json", exclude={"value", "assessment"})) for c in candidates)
    replace_file(inst_dir / CANDIDATES_FILE, "".join(json.dumps(row) + "\n" for row in rows))


class TestsCannotRun(UserError):
    """The pre-flight found that the verifying tests cannot run at the base commit (`found`: what it found)."""

    def __init__(self, found: Preflight) -> None:
        self.found = found
        super().__init__(f"the test command cannot run at the base commit: {found.cause}", hint=found.fix)


async def preflight(bench: Workbench, events: EventLog) -> Preflight | None:
    """Blind mode's pre-flight, before any model call: the verifying test command at the base commit (a
    `repair.preflight` event); tests that cannot run (every candidate would fail) are a UserError."""
    if bench.mode != "repo":
        return None
    found = await bench.preflight()
    iid = bench.task.instance_id
    events.write(RepairPreflight(node_id=iid, instance_id=iid, **found.model_dump(mode="json")))
    if not found.can_run:
        raise TestsCannotRun(found)
    return found


async def check_task(task: SWETask, cfg: RepairConfig) -> Preflight:
    """`agentflow repair --check`: the workflow and its node settings validated (a ConfigError names the first
    bad one), then only the pre-flight, in a fresh sandbox (no model is loaded)."""
    from agentflow.sandbox import open_sandbox

    load_repair_workflow(cfg)
    async with open_sandbox(cfg.backend, task_sandbox_config(cfg)) as sandbox:
        bench = Workbench(sandbox, task, with_setting(cfg, "tests.feedback", "repo"), _python_for(sandbox))
        await bench.setup()
        return await bench.preflight()


def _role_models(cfg: RepairConfig, spec: WorkflowSpec, node_settings: dict[str, dict[str, Any]], iid: str,
                 budget: Budget, events: EventLog, model: ChatModel | None, model_loader: ModelLoader | None,
                 owned: list[ChatModel], calls: ResponseCache | None = None) -> tuple[RoleModels, RepairConfig]:
    """The coder and the helper roles the workflow's nodes turn on (instrumented, and answered from the task's
    call journal `calls` where a killed run made the call); `cfg` with `edit_format: auto` resolved."""
    from agentflow.models.cache import CachedModel
    from agentflow.models.instrumented import InstrumentedModel
    from agentflow.models.spec import load_model

    loader = model_loader or (lambda s: load_model(s, **cfg.model_options))

    def load(spec_text: str) -> ChatModel:
        owned.append(loaded := loader(spec_text.replace("{instance_id}", iid)))
        return loaded

    def instrumented(inner: ChatModel) -> ChatModel:
        journaled = inner if calls is None else CachedModel(inner, calls, close_inner=False)
        return InstrumentedModel(journaled, budget=budget, events=events, node_id=iid)

    def on(flag: str) -> bool:  # a node of the workflow (or the run) turns the role on
        return bool(getattr(cfg, flag, False)) or bool(cfg.nodes.get(ALL_NODES, {}).get(flag)) or \
            any(settings.get(flag) for settings in node_settings.values())

    def role(spec_text: str | None, enabled: bool, coder: ChatModel) -> ChatModel | None:
        if spec_text is None:
            return coder if enabled else None
        return instrumented(load(spec_text))

    inner = model if model is not None else load(cfg.model)
    cfg = with_setting(cfg, "edit.format", edit_format_for(cfg, inner))
    if cfg.sampling.batch_samples > 1 and _samples_concurrently(spec, cfg):
        inner = SampleBatcher(inner, max_n=cfg.sampling.batch_samples)
    coder = instrumented(inner)
    models = RoleModels(coder, planner=role(cfg.roles.planner, on("plan"), coder),
                        critic=role(cfg.roles.critic, on("critique"), coder),
                        verifier=role(cfg.roles.verifier, False, coder))
    return models, cfg


def _samples_concurrently(spec: WorkflowSpec, cfg: RepairConfig) -> bool:
    """Whether a search over chains of attempts may draw several samples of one prompt at once (then they go as
    one request), as the workflow stands or as it searches once tests fail at the base commit."""
    searches = [SearchSettings.model_validate(dict(s.nodes[name].search or {}))
                for s in (spec, searches_for_failing_tests(spec, cfg)) if s is not None for name in attempt_searches(s)]
    return any(search.strategy != "best_of_n" or search.n > 1 for search in searches)


async def _run_graph(run: _TaskRun, rt: RepairRuntime) -> None:
    """Run (or continue) the task's workflow thread, its final state into `run.state` (an error is raised)."""
    from agentflow.graph.run.context import RunHandles
    from agentflow.graph.run.runner import WorkflowRunner

    spec, registry, inst_dir, outcome = run.spec, run.registry, run.inst_dir, run.outcome

    # a graph search forks the task's workspace per branch: it needs the sandbox (the main line's nodes use the
    # workbench's directly)
    sandbox = rt.bench.sandbox if graph_searches(spec) else None
    context = RunHandles(events=TaskEvents(rt.events, rt.iid), budget=rt.budget, deps=rt, node_types=registry,
                         sandbox=sandbox)
    checkpointer = "sqlite" if inst_dir is not None else "memory"
    t0 = time.perf_counter()
    # the repair keeps its own record of a task (outcome.json, patch.diff, candidates.jsonl): no run ledger
    async with WorkflowRunner(spec, run_dir=inst_dir, checkpointer=checkpointer, context=context,
                              ledger=False) as runner:
        existing = await runner.graph.aget_state(runner._config(THREAD))
        if existing.created_at is not None:
            rt.events.write(RepairResume(node_id=rt.iid, instance_id=rt.iid, next=list(existing.next)))
            result = await runner.resume(THREAD)
        else:
            result = await runner.start({}, thread_id=THREAD)
        run.candidates = await checkpointed_candidates(runner.checkpointer)
    outcome.graph_s = round(time.perf_counter() - t0, 3)
    outcome.nodes_s = round(context.node_clock.seconds, 3)
    run.state = dict(result.state)
    if result.status == "failed":
        if isinstance(result.exception, BudgetExceeded):  # cut at the wall clock: what the checkpoint holds stands
            outcome.limits_exceeded(result.exception.kind)
            outcome.error = str(result.exception)
            return
        if result.exception is not None:
            raise result.exception  # BudgetExceeded, ModelError, ...: the task's outcome says which
        error = next(iter(result.errors.values()))
        raise AgentflowError(f"node '{error.node}' failed: {error.error}")


async def _submit_best_so_far(outcome: InstanceOutcome, candidates: list[Candidate], bench: Workbench,
                              state: dict[str, Any], events: EventLog) -> None:
    """A task a limit stopped before its choice submits the best candidate verified so far, by the choice's first
    rules (`choose.leave_out_noops`, then the tests), then the smallest patch (`best_so_far`, no grade)."""
    pool = [c for c in candidates if c.status == "ok" and c.patch.strip() and c.verification is not None]
    if not pool:
        return
    iid = outcome.instance_id
    try:
        base_failed, noops = await noop_check(bench, state, [a.patch for a in pool])
    except AgentflowError:  # the sandbox cannot tell (it may be what the limit cut): the choice without the check
        base_failed, noops = None, {}
    kept = leave_out_noops(pool, noops, base_failed, events, iid)
    if outcome.base_failed is None:
        outcome.base_failed = base_failed
    if kept is None:
        outcome.chosen_by = "noop"
        return
    best = max(kept, key=lambda a: (*tests_key(a), -len(a.patch), -a.sample))
    outcome.model_patch, outcome.chosen, outcome.chosen_by = best.patch, best.candidate_id, "best_so_far"
    outcome.verification = best.verified
    with contextlib.suppress(AgentflowError):  # not checked: the flag stays None
        outcome.noop = await is_noop(bench, best.patch, noops)


def _fill_outcome(outcome: InstanceOutcome, state: dict[str, Any], budget: Budget) -> None:
    """The outcome as the final state says (what each node found, the choice and its grade)."""
    outcome.ranked = [f"{p}:{n}" for p, n in state.get("ranked") or []]
    outcome.suspects = list(state.get("suspects") or [])
    outcome.reproduced = (state.get("reproduction") or {}).get("kept")
    outcome.plan = state.get("plan") or None
    limit, error = trajectories_stop(state.get("trajectory_runs") or [])
    if outcome.status is RepairStatus.NO_PATCH and error:
        outcome.error = error
        if limit is not None:  # a trajectory was cut by a limit
            outcome.limits_exceeded(limit)
    if outcome.status is RepairStatus.NO_PATCH and (kind := budget.exceeded()) is not None:
        outcome.limits_exceeded(kind)
    if outcome.status is RepairStatus.NO_PATCH and outcome.error and not state.get("attempts"):
        outcome.status = RepairStatus.ENV_ERROR  # no candidate and an error: an infrastructure failure (resume retries it)
    if state.get("base"):
        outcome.base_failed = tests_fail_at_base(state["base"])
    chosen = state.get("chosen")
    if not chosen and (declined := (state.get("final") or {}).get("declined")):
        outcome.chosen_by = declined  # nothing submitted, and why (noop)
    if chosen:
        outcome.model_patch, outcome.chosen, outcome.chosen_by = chosen["patch"], chosen["candidate_id"], chosen["chosen_by"]
        outcome.noop = chosen.get("noop")
        final = state.get("final") or {}
        outcome.verification = final.get("verification")
        outcome.report = final.get("report")
        if outcome.status is RepairStatus.NO_PATCH:
            outcome.status = RepairStatus.SUBMITTED
