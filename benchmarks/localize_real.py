"""Localization without a model: how often the heuristic's suspects (the windows the repair's edits look at)
hold the gold function, on a tasks file, with each task's base test output as the repair sees it (blind mode:
the repository's own tests, run in the sandbox) -- no model calls, so it runs in minutes on every task.
Each task is ranked twice: from words and failure output alone (`hit`, `first`), and with the evidence of the
`swe.spectrum` node (the issue's examples and the suite run call-traced in the sandbox: `spectrum_hit`,
`spectrum_first`), as the repair workflow ranks.

With `--ranked RUN_DIR` each task is also ranked with the model's ranking that repair run recorded
(`ranked` in its outcome.json), as the search then ranks (`ranked_hit`, `ranked_first`; `-c rank_keep=N`
to try another setting without a model); a task without a recorded ranking ranks as the spectrum does.
`ranked_pinned_hit`: the same with `rank_keep_traced` on (the most suspect function keeps a place).

With `--lines` each task also gets the line spectrum of the `swe.spectrum` node's `line_marks` run
(`Workbench.line_evidence`, the 3 most suspect functions): `line_marked` (tasks with a marked line),
`line_on_gold` (a marked line is one the gold patch changes, or beside where it inserts), `line_near_gold`
(within one line of those), `line_first_on_gold` (the most suspect mark is), each a count over all tasks, and
per task its marks, the gold lines, the most suspect lines and where the first gold line stands among them
(`gold_line_rank`, marked or not; None: not among the top 10).

Prints ONE JSON object: tasks, hit (share with a gold function among the suspects), first (share with it
first), spectrum_hit, spectrum_first, ranked_hit, ranked_first, with_frames (tasks whose test output has traceback frames in the
package), examples_ran (tasks whose issue examples called package code), per_task (each task's `tests` the traced
suite recorded, the `problems` that left evidence out, `suspicion_rank`: the gold function's place in the
spectrum's suspicion list).
Run: .venv/bin/python benchmarks/localize_real.py [--tasks FILE] [-i ID ...] [--sandbox docker|local] [--ranked RUN_DIR]
     [--lines] [-c k=v]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from pathlib import Path

from repair_resolve import (  # this folder is on sys.path when the script runs
    base_sources,
    in_gold,
    read_jsonl,
)

from agentflow.repair.config import load_repair_config
from agentflow.repair.edit.steps import issue_text, suspects
from agentflow.repair.locate.localize import functions_touched, traceback_frames
from agentflow.repair.nodetypes.rollout import SweEditSettings
from agentflow.repair.verify.workbench import Workbench
from agentflow.sandbox import open_sandbox, resolve_backend
from agentflow.swe.evaluate import sandbox_python
from agentflow.swe.patch import changed_paths
from agentflow.swe.tasks import load_tasks

ROOT = Path(__file__).resolve().parents[1]


_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")


def gold_lines(patch: str) -> dict[str, set[int]]:
    """Per file, the base-commit lines a patch changes: those it removes or replaces, and for a hunk that only
    inserts, the lines either side of where it does (a removed statement put back)."""
    found: dict[str, set[int]] = {}
    path, old, replacing = "", 0, False
    for line in patch.splitlines():
        if line.startswith("--- "):
            continue
        if line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else line[4:]
        elif (hunk := _HUNK.match(line)) is not None:
            old, replacing = int(hunk.group(1)), False
        elif line.startswith("-"):
            found.setdefault(path, set()).add(old)
            old, replacing = old + 1, True
        elif line.startswith("+") and not replacing:  # an insertion: the lines either side of it
            found.setdefault(path, set()).update({old - 1, old})
        elif line.startswith(" "):
            old, replacing = old + 1, False
    return found


def line_result(lines: dict, patch: str) -> dict:  # type: ignore[type-arg]
    """Whether the line spectrum's marks fall on the lines the gold patch changes (`gold_lines`)."""
    gold = gold_lines(patch)
    marks = [(str(m[0]), int(m[1])) for m in lines.get("marks") or []]

    def within(mark: tuple[str, int], slack: int) -> bool:
        return any(abs(mark[1] - g) <= slack for g in gold.get(mark[0], set()))

    top = [(str(m[0]), int(m[1])) for m in lines.get("top") or []]
    return {"marks": [f"{p}:{n}" for p, n in marks], "gold_lines": {p: sorted(v) for p, v in gold.items()},
            "top_lines": lines.get("top"),
            "gold_line_rank": next((i for i, m in enumerate(top, 1) if within(m, 0)), None),
            "line_problems": lines.get("problems"), "line_tests": lines.get("tests"),
            "line_marked": bool(marks), "line_on_gold": any(within(m, 0) for m in marks),
            "line_near_gold": any(within(m, 1) for m in marks),
            "line_first_on_gold": bool(marks) and within(marks[0], 0)}


def recorded_ranking(run_dir: Path | None, instance_id: str) -> list[tuple[str, str]]:
    """The model's ranking of the suspects a repair run recorded for a task (`ranked` in its outcome.json)."""
    outcome = run_dir / "instances" / instance_id / "outcome.json" if run_dir else None
    if outcome is None or not outcome.is_file():
        return []
    return [tuple(name.split(":", 1)) for name in json.loads(outcome.read_text()).get("ranked", [])]  # type: ignore[misc]


async def one(task, row: dict, tasks_file: Path, cfg, prefer: list[tuple[str, str]],  # type: ignore[no-untyped-def]
              lines: bool = False) -> dict:
    async with open_sandbox(cfg.backend, cfg.sandbox) as sandbox:
        bench = Workbench(sandbox, task, cfg, sandbox_python(sandbox))
        await bench.setup()
        if bench.mode == "repo":  # as the repair runs it: test files needing a missing module are left out
            await bench.preflight()
        base = await bench.verify_base()
        sources = await bench.python_sources()
        issue = issue_text(task.problem_statement, task.hints_text)
        evidence, summary = await bench.gather_evidence(issue, sources, test_timeout_s=cfg.tests.timeout_s)
        line_spectrum = (await bench.line_evidence(issue, sources, summary, functions=3,
                                                   test_timeout_s=cfg.tests.timeout_s) if lines else None)
    gold_sources = base_sources(row, tasks_file, changed_paths(row["patch"]))
    gold = set(row.get("gold_functions") or functions_touched(row["patch"], gold_sources))
    # the windows an edit node shows, by its settings (`-c rank_keep=N` and the like are every node's)
    given = cfg.nodes.get("*", {})
    view = SweEditSettings(**{key: value for key, value in given.items() if key in SweEditSettings.model_fields})
    shown = [f"{w.path}:{w.symbol}" for w in suspects(view, sources, issue, base.output, focus=0)]
    ranked = [f"{w.path}:{w.symbol}" for w in suspects(view, sources, issue, base.output, focus=0, evidence=evidence,
                                                       prefer=prefer)]  # no recorded ranking: the spectrum's
    traced = [f"{w.path}:{w.symbol}" for w in suspects(view, sources, issue, base.output, focus=0, evidence=evidence)]
    pinned = view.model_copy(update={"rank_keep_traced": True})
    ranked_pinned = [f"{w.path}:{w.symbol}" for w in suspects(pinned, sources, issue, base.output, focus=0,
                                                              evidence=evidence, prefer=prefer)]
    return {"gold": sorted(gold), "suspects": shown, "hit": any(in_gold(s, gold) for s in shown),
            "first": bool(shown) and in_gold(shown[0], gold),
            "spectrum_suspects": traced, "spectrum_hit": any(in_gold(s, gold) for s in traced),
            "spectrum_first": bool(traced) and in_gold(traced[0], gold),
            "ranked_suspects": ranked, "ranked_hit": any(in_gold(s, gold) for s in ranked),
            "ranked_first": bool(ranked) and in_gold(ranked[0], gold),
            "ranked_pinned_suspects": ranked_pinned, "ranked_pinned_hit": any(in_gold(s, gold) for s in ranked_pinned),
            "frames": bool(traceback_frames(base.output, set(sources))), "examples_ran": bool(summary["executed"]),
            "tests": summary["tests"], "problems": summary["problems"],
            "suspicion_rank": suspicion_rank(summary["suspicion"], gold),
            **(line_result(line_spectrum, row["patch"]) if line_spectrum is not None else {})}


def suspicion_rank(suspicion: list, gold: set[str]) -> int | None:  # type: ignore[type-arg]
    """1-based place of the first gold function in the spectrum's suspicion list (None: not in it)."""
    return next((i for i, (path, name, _) in enumerate(suspicion, 1) if in_gold(f"{path}:{name}", gold)), None)


async def main(args: argparse.Namespace) -> dict:
    tasks_file = Path(args.tasks)
    rows = {r["instance_id"]: r for r in read_jsonl(tasks_file)}
    cfg = load_repair_config([f"backend={args.sandbox}", *args.config])
    cfg = cfg.model_copy(update={"backend": resolve_backend(cfg.backend)})
    started = time.perf_counter()
    per_task = {}
    for task in load_tasks(tasks_file):
        if args.instances and task.instance_id not in args.instances:
            continue
        prefer = recorded_ranking(Path(args.ranked) if args.ranked else None, task.instance_id)
        per_task[task.instance_id] = await one(task, rows[task.instance_id], tasks_file, cfg, prefer, args.lines)
        print(task.instance_id, per_task[task.instance_id]["hit"], per_task[task.instance_id]["spectrum_hit"],
              file=sys.stderr)
    n = len(per_task)
    return {"tasks": n, "tasks_file": str(tasks_file),
            "hit": round(sum(t["hit"] for t in per_task.values()) / n, 3),
            "first": round(sum(t["first"] for t in per_task.values()) / n, 3),
            "spectrum_hit": round(sum(t["spectrum_hit"] for t in per_task.values()) / n, 3),
            "spectrum_first": round(sum(t["spectrum_first"] for t in per_task.values()) / n, 3),
            "ranked_hit": round(sum(t["ranked_hit"] for t in per_task.values()) / n, 3),
            "ranked_first": round(sum(t["ranked_first"] for t in per_task.values()) / n, 3),
            "ranked_pinned_hit": round(sum(t["ranked_pinned_hit"] for t in per_task.values()) / n, 3),
            "examples_ran": sum(t["examples_ran"] for t in per_task.values()),
            "with_frames": sum(t["frames"] for t in per_task.values()),
            **({key: sum(t[key] for t in per_task.values()) for key in
                ("line_marked", "line_on_gold", "line_near_gold", "line_first_on_gold")} if args.lines else {}),
            "wall_s": round(time.perf_counter() - started, 1), "per_task": per_task}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default=str(ROOT / "examples" / "real-tasks" / "tasks.jsonl"))
    ap.add_argument("--sandbox", default="docker", choices=["docker", "local"])
    ap.add_argument("--ranked", default=None, help="a repair run directory: rank with the model rankings it recorded")
    ap.add_argument("-i", dest="instances", action="append", default=[],
                    help="only this task (repeatable; default: every task of the file)")
    ap.add_argument("--lines", action="store_true", help="also the line spectrum's marks against the gold lines")
    ap.add_argument("-c", dest="config", action="append", default=[], help="a repair setting, key=value")
    print(json.dumps(asyncio.run(main(ap.parse_args()))))
