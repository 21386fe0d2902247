"""A run of repairs over many tasks: `runs/<run_id>/` holds `config.resolved.yaml`, `events.jsonl`, per task
`instances/<id>/{outcome.json, patch.diff, candidates.jsonl}`, and, rebuilt after every task, `preds.jsonl`,
`candidates.jsonl` and `report.json`. A task is done when its `outcome.json` exists (written last); `resume`
skips done tasks except infrastructure failures (`env_error`).

Tasks run through an executor (`agentflow.executors`): in this process, or on Ray nodes, where a task runs in a
scratch folder with an in-memory event log and its files, events and outcome come back to the driver, which
writes them where an in-process run puts them (`outcome.json` last): only the driver writes the run directory,
and a task retried after its node died leaves no trace of the lost attempt. Inputs travel as `swe.shipping` says.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agentflow.budget import Budget, CallTime
from agentflow.config import load_yaml
from agentflow.errors import UserError
from agentflow.events import Event, EventLog, EventSink
from agentflow.events.kinds import (
    ExecutorLost,
    ExecutorRetry,
    ExecutorTask,
    RepairStatus,
    RunBudgetExceeded,
    RunEnd,
    RunStart,
)
from agentflow.executors.base import Executor, InProcessExecutor, open_executor
from agentflow.executors.types import ExecutorConfig, RemoteTaskError
from agentflow.observe import instrument
from agentflow.paths import path_component
from agentflow.repair.config import (
    ModelLoader,
    RepairConfig,
    as_written,
    changed_on_resume,
    load_repair_config,
)
from agentflow.repair.outcome import InstanceOutcome
from agentflow.repair.run.progress import Progress, RunCounts
from agentflow.repair.run.solve import RepairWorkflow, effective_strategy, load_repair_workflow, repair_task
from agentflow.repair.run.workflow_settings import search_summary
from agentflow.rundir import RunDir, check_folder
from agentflow.runfiles import read_text
from agentflow.runrecord import verified_yaml
from agentflow.secrets import redact
from agentflow.swe.report import InstanceReport, make_summary
from agentflow.swe.shipping import Shipping, on_this_node, prepare_node, read_tree, write_tree
from agentflow.swe.tasks import Prediction, SWETask, select_tasks


def instance_dir(out_dir: Path, instance_id: str) -> Path:
    """A task's folder in a run directory (`instances/<id>`, the id escaped as a path component)."""
    return out_dir / "instances" / path_component(instance_id, "instance_id")


def select(
    tasks: Sequence[SWETask],
    *,
    slice_: str | None = None,
    pattern: str | None = None,
    instance_ids: Sequence[str] = (),
) -> list[SWETask]:
    """Tasks chosen by ids, a regex on ids, and a `start:stop` slice (in that order)."""
    out = select_tasks(tasks, instance_ids or None)
    if pattern:
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise UserError(f"--filter {pattern!r} is not a valid regular expression: {exc}") from None
        out = [t for t in out if regex.search(t.instance_id)]
    if slice_:
        match = re.fullmatch(r"\s*(-?\d*)\s*:\s*(-?\d*)\s*", slice_)
        if not match:
            raise UserError(f"--slice {slice_!r} is not START:STOP", hint="e.g. --slice 0:10")
        start, stop = (int(g) if g else None for g in match.groups())
        out = out[start:stop]
    if not out:
        raise UserError("no task is selected", hint="check --slice, --filter and --instance-id")
    return out


def read_outcome(path: Path) -> InstanceOutcome | None:
    try:
        text = read_text(path)  # a regular file of the run folder, never read through a link
        return None if text is None else InstanceOutcome.model_validate_json(text)
    except (OSError, ValueError, UserError):
        return None


def _outcomes(out_dir: Path, tasks: Sequence[SWETask]) -> list[tuple[InstanceOutcome, Path]]:
    """The tasks' outcomes found in the run directory, with their folders, in task order."""
    found = []
    for task in tasks:
        inst = instance_dir(out_dir, task.instance_id)
        outcome = read_outcome(inst / "outcome.json")
        if outcome is not None:
            found.append((outcome, inst))
    return found


def summarise(tasks: Sequence[SWETask], outcomes: Sequence[InstanceOutcome]) -> dict[str, Any]:
    """report.json's content for these outcomes: SWE-bench's summary, tasks per status and per limit reached,
    `cost_usd`, and `instances`."""
    preds = [Prediction(instance_id=o.instance_id, model_patch=o.model_patch) for o in outcomes]
    reports = []
    instances: dict[str, Any] = {}
    for o in outcomes:
        data = dict(o.report or {})
        completed = bool(data.pop("completed", False))
        data["patch_exists"] = bool(o.model_patch.strip())
        report = InstanceReport(instance_id=o.instance_id, **data)
        report.completed = completed
        if o.infra_failure:
            report.error = report.error or o.error
        reports.append(report)
        instances[o.instance_id] = report.model_dump(mode="json") | {
            "status": str(o.status),
            "limit": o.limit,
            "feedback": o.feedback,
        }
    summary = make_summary(tasks, preds, reports)
    summary["statuses"] = dict(Counter(str(o.status) for o in outcomes))
    summary["limits"] = dict(Counter(o.limit for o in outcomes if o.limit is not None))
    summary["cost_usd"] = round(sum(float(o.usage.get("usd", 0.0) or 0.0) for o in outcomes), 6)
    summary["instances"] = instances
    return summary


def write_summaries(out_dir: Path, tasks: Sequence[SWETask], cfg: RepairConfig) -> dict[str, Any]:
    """Rebuild preds.jsonl, candidates.jsonl and report.json from the tasks' outcomes."""
    found = _outcomes(out_dir, tasks)
    outcomes = [o for o, _ in found]
    candidates: list[str] = []
    for _, inst in found:
        text = read_text(inst / "candidates.jsonl")  # never through a link the folder brings
        if text is not None:
            candidates.extend(line for line in text.splitlines() if line.strip())
    # the model as named in files meant to be shared: a password in its URL masked
    preds = [
        Prediction(instance_id=o.instance_id, model_name_or_path=redact(cfg.model), model_patch=o.model_patch)
        for o in outcomes
    ]
    rundir = RunDir(out_dir)
    rundir.write_jsonl("preds.jsonl", (p.model_dump(mode="json") for p in preds))
    rundir.write_text("candidates.jsonl", "".join(c + "\n" for c in candidates), code=True)
    summary = summarise(tasks, outcomes)
    rundir.write_text("report.json", json.dumps(summary, indent=2) + "\n")
    return summary


def _open_out_folder(out: Path, *, resume: bool, redo: bool) -> None:
    """A folder holding a run's results is continued (`resume`), emptied of them (`redo`) or refused."""
    check_folder(out)
    inst_root = out / "instances"
    if not (resume or redo) and any(inst_root.glob("*/outcome.json")):
        raise UserError(
            f"{out} already holds results of a run",
            hint="use --resume to continue it or --redo to start over",
        )
    if redo and inst_root.is_dir():
        shutil.rmtree(inst_root)
        for name in ("preds.jsonl", "candidates.jsonl", "report.json", "events.jsonl"):
            (out / name).unlink(missing_ok=True)


def _check_resumed_settings(out: Path, cfg: RepairConfig) -> None:
    """A resumed run goes on with the settings its finished tasks were repaired with, but for
    `RESUME_MAY_CHANGE`; other changes are a UserError naming the first. A config.resolved.yaml this user's run
    key did not sign is not compared: its settings were not used (`resumed_repair_config`)."""
    if not any((out / "instances").glob("*/outcome.json")):
        return
    text = read_text(out / "config.resolved.yaml")  # never through a link the folder brings
    body = verified_yaml(text) if text is not None else None
    if body is None:
        return
    recorded = load_yaml(body, str(out / "config.resolved.yaml"))
    # read as this version reads settings (its defaults, later renames), as a resume from the CLI reads them
    recorded_cfg = load_repair_config([], base=dict(recorded) if isinstance(recorded, dict) else {})
    changed = changed_on_resume(as_written(recorded_cfg), cfg)
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise UserError(f"--resume of {out} with other settings than its finished tasks had: {changed[0]}{more}",
                        hint="resume with the run's settings (leave out that -c or flag), run these in another "
                             "folder (-o), or start this one over (--redo)")


class RepairResult(BaseModel):
    """What a remote repair hands back to the driver."""

    outcome: InstanceOutcome
    files: dict[str, str] = Field(default_factory=dict)
    """The instance folder's files by name (outcome.json among them when the task finished)."""
    events: list[Event] = Field(default_factory=list)


async def repair_job(task: SWETask, cfg: RepairConfig, run_id: str, run_budget: Budget | None,
                     repo_blob: bytes | None, wheel_blob: bytes | None,
                     stop_on_preflight: bool = False, earlier_calls: CallTime | None = None) -> RepairResult:
    """Runs on a worker node: one repair in a scratch folder; everything it wrote comes back."""
    task = on_this_node(task, repo_blob, wheel_blob)
    prepare_node(cfg.backend, cfg.sandbox)
    events = EventLog(None, run_id=run_id)
    with tempfile.TemporaryDirectory(prefix="agentflow-task-") as scratch:
        inst = Path(scratch) / "instance"
        outcome = await repair_task(task, cfg, events=events, inst_dir=inst, run_budget=run_budget,
                                    stop_on_preflight=stop_on_preflight, earlier_calls=earlier_calls)
        files = read_tree(inst)
    return RepairResult(outcome=outcome, files=files, events=events.events)


async def repair_via(executor: Executor, shipping: Shipping | None, task: SWETask, cfg: RepairConfig, *,
                     events: EventLog, inst_dir: Path, model_loader: ModelLoader | None = None,
                     run_budget: Budget | None = None, workflow: RepairWorkflow | None = None,
                     stop_on_preflight: bool = False, earlier_calls: CallTime | None = None) -> InstanceOutcome:
    """Repair `task` on `executor`, the run directory written here, on the driver (`workflow`: the run's loaded
    repair workflow, in process; `stop_on_preflight`, `earlier_calls`: as `repair_task`'s; a remote task gets
    a copy of `earlier_calls` as they are when it starts)."""
    if not executor.remote:
        return await repair_task(task, cfg, events=events, inst_dir=inst_dir, model_loader=model_loader,
                                 run_budget=run_budget, workflow=workflow, stop_on_preflight=stop_on_preflight,
                                 earlier_calls=earlier_calls)
    label = f"repair:{task.instance_id}"
    try:
        try:
            repo, wheels = shipping.inputs(task) if shipping is not None else (None, None)
        except UserError:  # a repository that is not there: the task's set-up reports it (env_error)
            repo, wheels = None, None
        result = await executor.call(repair_job, task, cfg, events.run_id, run_budget, repo, wheels,
                                     stop_on_preflight, earlier_calls, label=label)
    except RemoteTaskError as exc:
        outcome = InstanceOutcome(instance_id=task.instance_id, status=RepairStatus.ENV_ERROR, error=str(exc))
        events.write(ExecutorLost(node_id=task.instance_id, instance_id=task.instance_id, error=str(exc),
                                  attempts=exc.attempts))
        write_tree(inst_dir, {"patch.diff": "", "candidates.jsonl": "",
                               "outcome.json": json.dumps(outcome.model_dump(mode="json"), indent=2) + "\n"},
                    last="outcome.json")
        return outcome
    _report_placement(executor, label, events, task.instance_id)
    for event in result.events:
        events.write(event)
    write_tree(inst_dir, result.files, last="outcome.json")
    return result.outcome


def _report_placement(executor: Executor, label: str, events: EventLog, instance_id: str) -> None:
    """`executor.task`: the nodes the task ran on; `executor.retry` too when it ran more than once."""
    nodes = executor.started_on(label)
    events.write(ExecutorTask(node_id=instance_id, instance_id=instance_id, nodes=nodes))
    if len(nodes) > 1:
        events.write(ExecutorRetry(node_id=instance_id, instance_id=instance_id, attempts=len(nodes), nodes=nodes))


async def _prepare_run(tasks: Sequence[SWETask], cfg: RepairConfig, out: Path, executor: Executor, *,
                       resume: bool, redo: bool) -> tuple[RepairConfig, RepairWorkflow, RunDir]:
    """What is checked and written before any task runs: every id names a folder, the sandbox backend is
    resolved, `out` is opened, the workflow loaded and validated, config.resolved.yaml written. The run's
    settings as recorded, its workflow and its folder."""
    for task in tasks:  # every id must name a folder before anything runs
        instance_dir(out, task.instance_id)
    from agentflow.sandbox import resolve_backend

    # once, before any task: no Docker is a one-line error, not a batch of env_errors; and the backend
    # recorded in config.resolved.yaml is the one used, not "auto" (on Ray, each node resolves its own)
    if not executor.remote:
        cfg = cfg.model_copy(update={"backend": await asyncio.to_thread(resolve_backend, cfg.backend)})
    _open_out_folder(out, resume=resume, redo=redo)
    workflow = load_repair_workflow(cfg)  # validated once, before any task
    cfg = effective_strategy(cfg, workflow)
    if resume:
        _check_resumed_settings(out, cfg)
    rundir = RunDir.create(out)
    rundir.write_config(cfg)
    return cfg, workflow, rundir


async def run_batch(
    tasks: Sequence[SWETask],
    cfg: RepairConfig,
    out_dir: str | Path,
    *,
    resume: bool = False,
    redo: bool = False,
    on_progress: Callable[[Progress, InstanceOutcome | None], None] | None = None,
    model_loader: ModelLoader | None = None,
    executor: Executor | ExecutorConfig | None = None,
    sinks: Sequence[EventSink] = (),
) -> dict[str, Any]:
    """Repair every task (`cfg.workers` at a time) into `out_dir`; the report.json summary. `executor`: where
    tasks run (default: this process); `sinks` see every event as it is written (`ProgressPrinter`);
    `on_progress` is called before the first task and after each one."""
    if isinstance(executor, ExecutorConfig):
        async with open_executor(executor) as opened:
            return await run_batch(tasks, cfg, out_dir, resume=resume, redo=redo, on_progress=on_progress,
                                   model_loader=model_loader, executor=opened, sinks=sinks)
    executor = executor or InProcessExecutor()
    if executor.remote and model_loader is not None:
        raise UserError("--serve cannot be combined with --executor ray",
                        hint="start a model server every node reaches and pass it with --model")
    out = Path(out_dir)
    cfg, workflow, rundir = await _prepare_run(tasks, cfg, out, executor, resume=resume, redo=redo)
    search = search_summary(workflow.spec)
    found = _outcomes(out, tasks)
    finished = {o.instance_id for o, _ in found if not o.infra_failure}
    todo = [task for task in tasks if task.instance_id not in finished]
    progress = Progress(total=len(tasks), todo=len(todo), workers=cfg.workers,
                        counts=RunCounts.of(summarise(tasks, [o for o, _ in found])))
    if on_progress is not None:
        on_progress(progress, None)
    gate = asyncio.Semaphore(cfg.workers)
    lock = asyncio.Lock()
    run_budget = executor.run_budget(cfg.limits.run_budget_usd, spent_usd=progress.counts.cost_usd)
    # the model calls of the tasks finished so far (in an earlier leg too): a task's first pace
    earlier_calls = CallTime()
    for earlier, _ in found:
        if earlier.instance_id in finished:
            earlier_calls.add(earlier.call_time)
    shipping = Shipping(executor) if executor.remote else None
    skipped: list[str] = []
    with rundir.events() as events:
        instrument(events, cfg.trace)
        events.sinks.extend(sinks)
        events.write(RunStart(total=len(tasks), todo=len(todo), resume=resume, search=search, executor=executor.kind))

        async def one(task: SWETask) -> None:
            async with gate:
                if run_budget is not None and run_budget.exceeded() is not None:
                    skipped.append(task.instance_id)  # no outcome: a --resume with a larger limit runs it
                    return
                outcome = await repair_via(executor, shipping, task, cfg, events=events,
                                           inst_dir=instance_dir(out, task.instance_id), model_loader=model_loader,
                                           run_budget=run_budget, workflow=workflow,
                                           stop_on_preflight=len(tasks) == 1, earlier_calls=earlier_calls)
            earlier_calls.add(outcome.call_time)
            async with lock:
                summary = await asyncio.to_thread(write_summaries, out, tasks, cfg)
                progress.counts = RunCounts.of(summary)
                progress.durations.append(outcome.duration_s)
                if on_progress is not None:
                    on_progress(progress, outcome)

        await asyncio.gather(*(one(t) for t in todo))
        summary = write_summaries(out, tasks, cfg)
        if skipped:
            events.write(RunBudgetExceeded(limit_usd=cfg.limits.run_budget_usd, not_started=skipped))
        events.write(RunEnd(resolved=summary["resolved_instances"], statuses=summary["statuses"],
                            limits=summary["limits"]))

    return summary
