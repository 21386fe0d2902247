"""Localization without a model: how often the heuristic's suspects (the windows the repair's edits look at)
hold the gold function, on a tasks file, with each task's base test output as the repair sees it (blind mode:
the repository's own tests, run in the sandbox) -- no model calls, so it runs in minutes on every task.

Prints ONE JSON object: tasks, hit (share with a gold function among the suspects), first (share with it
first), with_frames (tasks whose test output has traceback frames in the package), per_task.
Run: .venv/bin/python benchmarks/localize_real.py [--tasks FILE] [--sandbox docker|local]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from repair_resolve import (  # this folder is on sys.path when the script runs
    base_sources,
    in_gold,
    read_jsonl,
)

from agentflow.repair.config import load_repair_config
from agentflow.repair.localize import functions_touched, traceback_frames
from agentflow.repair.steps import issue_text, suspects
from agentflow.repair.workbench import Workbench
from agentflow.sandbox import open_sandbox, resolve_backend
from agentflow.swe.patch import changed_paths
from agentflow.swe.tasks import load_tasks

ROOT = Path(__file__).resolve().parents[1]


async def one(task, row: dict, tasks_file: Path, cfg) -> dict:  # type: ignore[no-untyped-def]
    async with open_sandbox(cfg.backend, cfg.sandbox) as sandbox:
        bench = Workbench(sandbox, task, cfg, "python3")
        await bench.setup()
        base = await bench.verify_base()
        sources = await bench.python_sources()
    gold_sources = base_sources(row, tasks_file, changed_paths(row["patch"]))
    gold = set(row.get("gold_functions") or functions_touched(row["patch"], gold_sources))
    issue = issue_text(task.problem_statement, task.hints_text)
    shown = [f"{w.path}:{w.symbol}" for w in suspects(cfg, sources, issue, base.output, focus=0)]
    return {"gold": sorted(gold), "suspects": shown, "hit": any(in_gold(s, gold) for s in shown),
            "first": bool(shown) and in_gold(shown[0], gold),
            "frames": bool(traceback_frames(base.output, set(sources)))}


async def main(args: argparse.Namespace) -> dict:
    tasks_file = Path(args.tasks)
    rows = {r["instance_id"]: r for r in read_jsonl(tasks_file)}
    cfg = load_repair_config([f"backend={args.sandbox}"])
    cfg = cfg.model_copy(update={"backend": resolve_backend(cfg.backend)})
    started = time.perf_counter()
    per_task = {}
    for task in load_tasks(tasks_file):
        per_task[task.instance_id] = await one(task, rows[task.instance_id], tasks_file, cfg)
        print(task.instance_id, per_task[task.instance_id]["hit"], file=sys.stderr)
    n = len(per_task)
    return {"tasks": n, "tasks_file": str(tasks_file),
            "hit": round(sum(t["hit"] for t in per_task.values()) / n, 3),
            "first": round(sum(t["first"] for t in per_task.values()) / n, 3),
            "with_frames": sum(t["frames"] for t in per_task.values()),
            "wall_s": round(time.perf_counter() - started, 1), "per_task": per_task}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default=str(ROOT / "examples" / "real-tasks" / "tasks.jsonl"))
    ap.add_argument("--sandbox", default="docker", choices=["docker", "local"])
    print(json.dumps(asyncio.run(main(ap.parse_args()))))
