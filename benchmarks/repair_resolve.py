"""Resolve rate of `agentflow bench` on the example tasks with the embedded model, per strategy, at about the
same number of edit samples per task: single (one chain of 3 attempts), best-of-8 (8 one-shot samples) and
MCTS (4 expansions of 2 samples, depth 2). Blind mode (the default): the hidden tests only grade the result.

Long: about 15-30 minutes per strategy on 2 CPU cores (Qwen2.5-Coder-1.5B on llama.cpp). Prints one JSON object.
Run: .venv/bin/python benchmarks/repair_resolve.py [STRATEGY ...] [--out DIR] [--workers N] [-c key=value ...]
Each strategy's run directory is kept under --out (default runs/resolve-<date>), so a run can be resumed
(`--resume` is passed when the directory holds results).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "examples" / "swe-tasks" / "tasks.jsonl"
STRATEGIES: dict[str, list[str]] = {
    "single": ["--strategy", "single", "-c", "max_attempts=3"],
    "best_of_8": ["--strategy", "best-of-n", "-n", "8", "-c", "max_attempts=1"],
    "mcts": ["--strategy", "mcts", "-n", "4", "-c", "max_attempts=2", "-c", "mcts_k=2"],
}


def figures(run_dir: Path, wall_s: float) -> dict[str, object]:
    report = json.loads((run_dir / "report.json").read_text())
    outcomes = [json.loads(p.read_text()) for p in sorted((run_dir / "instances").glob("*/outcome.json"))]
    total = report["total_instances"]
    calls = [o["usage"].get("model_calls", 0) for o in outcomes]
    return {
        "resolved": report["resolved_instances"],
        "total": total,
        "resolve_rate": round(report["resolved_instances"] / total, 3) if total else 0.0,
        "resolved_ids": report["resolved_ids"],
        "wall_s": round(wall_s, 1),
        "model_calls_mean": round(sum(calls) / len(calls), 2) if calls else 0.0,
        "tokens": sum(o["usage"].get("tokens", 0) for o in outcomes),
        "reproduced": sum(1 for o in outcomes if o.get("reproduced")),
        "statuses": report.get("statuses", {}),
        "chosen_by": {k: sum(1 for o in outcomes if o.get("chosen_by") == k)
                      for k in sorted({str(o.get("chosen_by")) for o in outcomes})},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("strategies", nargs="*", default=list(STRATEGIES))
    parser.add_argument("--out", default=str(ROOT / "runs" / f"resolve-{time.strftime('%Y%m%d')}"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("-c", dest="config", action="append", default=[])
    args = parser.parse_args()
    agentflow = str(Path(sys.executable).parent / "agentflow")
    result: dict[str, object] = {"model": "local:qwen2.5-coder-1.5b", "tasks": str(TASKS.relative_to(ROOT)),
                                 "workers": args.workers, "config": args.config}
    for name in args.strategies:
        run_dir = Path(args.out) / name
        argv = [agentflow, "bench", str(TASKS), *STRATEGIES[name], "--workers", str(args.workers), "-o", str(run_dir)]
        for item in args.config:
            argv += ["-c", item]
        if (run_dir / "instances").is_dir():
            argv.append("--resume")
        start = time.perf_counter()
        proc = subprocess.run(argv, check=False, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=sys.stderr)
        wall = time.perf_counter() - start
        if not (run_dir / "report.json").is_file():
            result[name] = {"error": f"agentflow bench exited {proc.returncode} without a report"}
            continue
        result[name] = figures(run_dir, wall)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
