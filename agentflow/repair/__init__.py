"""The repair solver (layer 6, above the SWE-bench harness in `agentflow.swe`): localize, rank, reproduce,
plan, edit, test, critique and choose, as node types of a graph workflow (`workflows/repair.yaml`).

Public names resolve lazily, so importing `agentflow.repair` costs nothing until one is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentflow._lazy import lazy_getattr

_LAZY: dict[str, str] = {
    "RepairConfig": "agentflow.repair.config",
    "RepairPrompts": "agentflow.repair.config",
    "RunInputs": "agentflow.repair.config",
    "load_repair_config": "agentflow.repair.config",
    "Candidate": "agentflow.repair.outcome",
    "InstanceOutcome": "agentflow.repair.outcome",
    "repair_task": "agentflow.repair.run.solve",
    "run_batch": "agentflow.repair.run.runs",
}

if TYPE_CHECKING:  # pragma: no cover
    from agentflow.repair.config import RepairConfig, RepairPrompts, RunInputs, load_repair_config
    from agentflow.repair.outcome import Candidate, InstanceOutcome
    from agentflow.repair.run.runs import run_batch
    from agentflow.repair.run.solve import repair_task

__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = [
    "Candidate",
    "InstanceOutcome",
    "RepairConfig",
    "RepairPrompts",
    "RunInputs",
    "load_repair_config",
    "repair_task",
    "run_batch",
]
