"""`bench` tasks through an executor (`agentflow.executors`): in this process, or on Ray nodes.

On a remote executor a task runs on a worker node in a scratch folder with an in-memory event log; its files,
events and outcome come back to the driver, which writes them where an in-process run puts them
(`outcome.json` last): only the driver writes the run directory, and a task retried after its node died
leaves no trace of the lost attempt. Inputs travel as `swe.shipping` says.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agentflow.budget import Budget
from agentflow.errors import UserError
from agentflow.events import Event, EventLog
from agentflow.events.kinds import ExecutorLost, ExecutorRetry, ExecutorTask, RepairStatus
from agentflow.executors.base import Executor
from agentflow.executors.types import RemoteTaskError
from agentflow.repair.config import ModelLoader, RepairConfig
from agentflow.repair.outcome import InstanceOutcome
from agentflow.repair.run.solve import repair_task
from agentflow.swe.shipping import Shipping, on_this_node, prepare_node, read_tree, write_tree
from agentflow.swe.tasks import SWETask

__all__ = ["RepairResult", "repair_job", "repair_via"]


class RepairResult(BaseModel):
    """What a remote repair hands back to the driver."""

    outcome: InstanceOutcome
    files: dict[str, str] = Field(default_factory=dict)
    """The instance folder's files by name (outcome.json among them when the task finished)."""
    events: list[Event] = Field(default_factory=list)


async def repair_job(task: SWETask, cfg: RepairConfig, run_id: str, run_budget: Budget | None,
                     repo_blob: bytes | None, wheel_blob: bytes | None,
                     stop_on_preflight: bool = False) -> RepairResult:
    """Runs on a worker node: one repair in a scratch folder; everything it wrote comes back."""
    task = on_this_node(task, repo_blob, wheel_blob)
    prepare_node(cfg.backend, cfg.sandbox)
    events = EventLog(None, run_id=run_id)
    with tempfile.TemporaryDirectory(prefix="agentflow-task-") as scratch:
        inst = Path(scratch) / "instance"
        outcome = await repair_task(task, cfg, events=events, inst_dir=inst, run_budget=run_budget,
                                    stop_on_preflight=stop_on_preflight)
        files = read_tree(inst)
    return RepairResult(outcome=outcome, files=files, events=events.events)


async def repair_via(executor: Executor, shipping: Shipping | None, task: SWETask, cfg: RepairConfig, *,
                     events: EventLog, inst_dir: Path, model_loader: ModelLoader | None = None,
                     run_budget: Budget | None = None, workflow: Any = None,
                     stop_on_preflight: bool = False) -> InstanceOutcome:
    """Repair `task` on `executor`, the run directory written here, on the driver (`workflow`: the run's loaded
    repair workflow, in process; `stop_on_preflight`: as `repair_task`'s)."""
    if not executor.remote:
        return await repair_task(task, cfg, events=events, inst_dir=inst_dir, model_loader=model_loader,
                                 run_budget=run_budget, workflow=workflow, stop_on_preflight=stop_on_preflight)
    label = f"repair:{task.instance_id}"
    try:
        try:
            repo, wheels = shipping.inputs(task) if shipping is not None else (None, None)
        except UserError:  # a repository that is not there: the task's set-up reports it (env_error)
            repo, wheels = None, None
        result = await executor.call(repair_job, task, cfg, events.run_id, run_budget, repo, wheels,
                                     stop_on_preflight, label=label)
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

