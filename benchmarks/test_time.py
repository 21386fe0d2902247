"""Test time per candidate with and without targeting, on the real tasks, no model: each task's gold patch (a
fix) and a mutant of it (the gold change plus a `raise` at the top of the first function it changes: a loser)
are verified as the repair verifies candidates (blind mode: the repository's suite in the task's Docker
sandbox), once with `target_tests` (the tests that reach the changed functions, in the base commit's traced
run) and once with the whole suite; the finalist's whole-suite confirmation is counted for the fix.

Keys: `test_seconds_per_candidate` {targeted, whole} (the fix's targeted run plus its confirmation, the
mutant's targeted run; against both runs of the whole suite), their `ratio`, `targeted_share` (candidates
whose run was narrowed), `estimate_agrees` (candidates whose targeted verdict, passed or not, is the whole
suite's), `losers_stopped` (mutants refuted by their targeted run), `max_wait_ratio` (the longest candidate
run over its task's base run) and per task figures. Prints one JSON object.
Run: .venv/bin/python benchmarks/test_time.py [--limit N] [--seed S] [--tasks FILE]
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TASKS = ROOT / "examples" / "real-tasks" / "tasks.jsonl"
GOLD = ROOT / "examples" / "real-tasks" / "gold.jsonl"


async def measure(task: Any, gold: str, image: str) -> dict[str, Any]:
    from agentflow.repair.config import load_repair_config
    from agentflow.repair.verify.targeting import SuiteReach
    from agentflow.repair.verify.workbench import HowToVerify, Workbench
    from agentflow.sandbox import open_sandbox

    cfg = load_repair_config(["backend=docker", f"sandbox.image={image}", "tests.feedback=repo"])
    async with open_sandbox("docker", cfg.sandbox) as sandbox:
        bench = Workbench(sandbox, task, cfg, "python3")
        await bench.setup()
        await bench.preflight()
        base = await bench.verify_base()
        sources = await bench.python_sources()
        _, summary = await bench.gather_evidence(task.problem_statement, sources, test_timeout_s=cfg.tests.timeout_s)
        how = HowToVerify(base=base, reach=SuiteReach.from_json(summary.get("reach")))
        candidates = {"fix": gold}
        await bench.restore(gold)
        fixed_sources = await bench.python_sources()
        mutated = _raise_in_first_changed(gold, sources, fixed_sources)
        if mutated is not None:
            await sandbox.write_file(mutated[0], mutated[1])
            candidates["mutant"], _ = await bench.diff()
        await bench.reset()
        rows: dict[str, Any] = {}
        for name, patch in candidates.items():
            bench._verified.clear()  # each measurement runs its tests: none taken from the cache
            started = bench.test_time.total_s
            targeted, _ = await bench.verify(patch, how)
            if name == "fix" and targeted.targeted is not None:
                await bench.verify(patch, how, whole=True)  # the finalist's confirmation
            targeted_s = bench.test_time.total_s - started
            bench._verified.clear()
            started = bench.test_time.total_s
            whole, _ = await bench.verify(patch, how, whole=True)
            whole_s = bench.test_time.total_s - started
            rows[name] = {"targeted": targeted.targeted, "targeted_s": round(targeted_s, 2), "whole_s": round(whole_s, 2),
                          "targeted_passed": targeted.passed, "whole_passed": whole.passed,
                          "targeted_ok": targeted.exit_code == 0, "whole_counts": whole.counts}
        return {"base_s": base.seconds, "tests": len(how.reach.ids) if how.reach else None,
                "longest_wait_s": round(bench.test_time.longest_s, 2), "candidates": rows}


def _raise_in_first_changed(gold: str, base: dict[str, str], fixed: dict[str, str]) -> tuple[str, str] | None:
    """(path, the fixed file with `raise RuntimeError` first in the first function the gold patch changes, after
    its docstring); None when the change is outside any function."""
    from agentflow.repair.locate.localize import symbols
    from agentflow.repair.verify.targeting import changed_functions

    changed = changed_functions(gold, base)
    if not changed:
        return None
    path, qualname = min(changed)
    sym = next((s for s in symbols(path, fixed[path]) if s.qualname == qualname), None)
    if sym is None or not sym.body:
        return None
    first = sym.body[0]
    lines = fixed[path].splitlines(keepends=True)
    if first.lineno == sym.start:  # `def f(): return x` on one line
        return None
    start = first.lineno
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        start = (first.end_lineno or first.lineno) + 1  # after the docstring
    indent = re.match(r"[ \t]*", lines[first.lineno - 1]).group(0)  # type: ignore[union-attr]
    return path, "".join(lines[: start - 1] + [f"{indent}raise RuntimeError('mutant')\n"] + lines[start - 1:])


def summarise(per_task: dict[str, Any]) -> dict[str, Any]:
    rows = [(iid, name, c) for iid, t in per_task.items() if "candidates" in t for name, c in t["candidates"].items()]
    targeted_s = sum(c["targeted_s"] for _, _, c in rows)
    whole_s = sum(c["whole_s"] for _, _, c in rows)
    narrowed = [c for _, _, c in rows if c["targeted"] is not None]
    agrees = sum(1 for _, _, c in rows if c["targeted_passed"] == c["whole_passed"])
    mutants = [c for _, name, c in rows if name == "mutant"]
    waits = [t["longest_wait_s"] / t["base_s"] for t in per_task.values() if t.get("base_s")]
    return {
        "candidates": len(rows),
        "test_seconds_per_candidate": {"targeted": round(targeted_s / len(rows), 2) if rows else 0.0,
                                       "whole": round(whole_s / len(rows), 2) if rows else 0.0},
        "ratio": round(targeted_s / whole_s, 3) if whole_s else None,
        "targeted_share": round(len(narrowed) / len(rows), 3) if rows else 0.0,
        "estimate_agrees": f"{agrees}/{len(rows)}",
        "losers_stopped": f"{sum(1 for c in mutants if c['targeted'] is not None and c['targeted_passed'] is False)}"
                          f"/{len(mutants)}",
        "max_wait_ratio": round(max(waits, default=0.0), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tasks", default=str(TASKS))
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--image", default=None, help="sandbox image (default: the built one)")
    args = parser.parse_args()
    from agentflow.sandbox.config import SandboxConfig
    from agentflow.swe.tasks import load_tasks

    image = args.image or SandboxConfig().image
    tasks = load_tasks(Path(args.tasks))
    gold = {json.loads(line)["instance_id"]: json.loads(line)["model_patch"]
            for line in GOLD.read_text().splitlines() if line.strip()}
    tasks = [t for t in tasks if t.instance_id in gold]
    if args.limit and args.limit < len(tasks):
        tasks = sorted(random.Random(args.seed).sample(tasks, args.limit), key=lambda t: t.instance_id)
    started = time.perf_counter()
    per_task: dict[str, Any] = {}
    for task in tasks:
        try:
            per_task[task.instance_id] = asyncio.run(measure(task, gold[task.instance_id], image))
        except Exception as exc:  # noqa: BLE001 - one task's failure is reported, the others go on
            per_task[task.instance_id] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        print(f"{task.instance_id}: {json.dumps(per_task[task.instance_id])[:300]}", file=sys.stderr, flush=True)
    print(json.dumps({"tasks": len(tasks), "wall_s": round(time.perf_counter() - started, 1),
                      **summarise(per_task), "per_task": per_task}))


if __name__ == "__main__":
    main()
