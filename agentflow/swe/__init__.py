"""SWE-bench-compatible tasks, patches and evaluation (layer 5: may import layers 1-4).

Public names resolve lazily, so importing `agentflow.swe` costs nothing until one is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentflow._lazy import lazy_getattr

_LAZY: dict[str, str] = {
    **dict.fromkeys(("SWETask", "Prediction", "load_tasks", "load_predictions", "select_tasks", "write_jsonl"),
                    "agentflow.swe.tasks"),
    **dict.fromkeys(("clean_patch", "make_patch", "strip_test_files", "is_test_path", "parse_patch", "apply_patch",
                     "workspace_diff"), "agentflow.swe.patch"),
    **dict.fromkeys(("seed_workspace", "snapshot_commit"), "agentflow.swe.workspace"),
    **dict.fromkeys(("EvalConfig", "evaluate_predictions", "run_prediction"), "agentflow.swe.evaluate"),
    **dict.fromkeys(("InstanceReport", "make_summary"), "agentflow.swe.report"),
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
