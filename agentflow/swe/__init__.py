"""SWE-bench-compatible tasks, patches and evaluation (layer 5: may import layers 1-4).

Public names resolve lazily, so importing `agentflow.swe` costs nothing until one is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentflow._lazy import lazy_getattr

_LAZY: dict[str, str] = {
    "SWETask": "agentflow.swe.tasks",
    "Prediction": "agentflow.swe.tasks",
    "load_tasks": "agentflow.swe.tasks",
    "load_predictions": "agentflow.swe.tasks",
    "select_tasks": "agentflow.swe.tasks",
    "write_jsonl": "agentflow.swe.tasks",
    "clean_patch": "agentflow.swe.patch",
    "make_patch": "agentflow.swe.patch",
    "strip_test_files": "agentflow.swe.patch",
    "is_test_path": "agentflow.swe.patch",
    "parse_patch": "agentflow.swe.patch",
    "apply_patch": "agentflow.swe.patch",
    "workspace_diff": "agentflow.swe.patch",
    "seed_workspace": "agentflow.swe.workspace",
    "snapshot_commit": "agentflow.swe.workspace",
    "EvalConfig": "agentflow.swe.evaluate",
    "evaluate_predictions": "agentflow.swe.evaluate",
    "run_prediction": "agentflow.swe.evaluate",
    "InstanceReport": "agentflow.swe.report",
    "make_summary": "agentflow.swe.report",
}

if TYPE_CHECKING:  # pragma: no cover
    from agentflow.swe.evaluate import EvalConfig, evaluate_predictions, run_prediction
    from agentflow.swe.patch import (
        apply_patch,
        clean_patch,
        is_test_path,
        make_patch,
        parse_patch,
        strip_test_files,
        workspace_diff,
    )
    from agentflow.swe.report import InstanceReport, make_summary
    from agentflow.swe.tasks import (
        Prediction,
        SWETask,
        load_predictions,
        load_tasks,
        select_tasks,
        write_jsonl,
    )
    from agentflow.swe.workspace import seed_workspace, snapshot_commit


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


__all__ = [
    "EvalConfig",
    "InstanceReport",
    "Prediction",
    "SWETask",
    "apply_patch",
    "clean_patch",
    "evaluate_predictions",
    "is_test_path",
    "load_predictions",
    "load_tasks",
    "make_patch",
    "make_summary",
    "parse_patch",
    "run_prediction",
    "seed_workspace",
    "select_tasks",
    "snapshot_commit",
    "strip_test_files",
    "workspace_diff",
    "write_jsonl",
]
