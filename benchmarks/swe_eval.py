"""Wall time of `agentflow eval` on the example tasks' gold predictions (every one must resolve), per
sandbox backend, and the mean time per instance.

Prints one JSON object. Run: .venv/bin/python benchmarks/swe_eval.py [WORKERS]
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from agentflow.swe import EvalConfig, evaluate_predictions, load_predictions, load_tasks

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "swe-tasks"


async def measure(backend: str, workers: int) -> dict[str, float | int]:
    tasks = load_tasks(EXAMPLES / "tasks.jsonl")
    gold = load_predictions(EXAMPLES / "gold.jsonl")
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        summary = await evaluate_predictions(tasks, gold, EvalConfig(backend=backend, workers=workers), out_dir=out)  # type: ignore[arg-type]
        wall = time.perf_counter() - start
    assert summary["resolved_instances"] == len(tasks), summary
    mean = sum(i["duration_s"] for i in summary["instances"].values()) / len(tasks)
    return {"instances": len(tasks), "wall_s": round(wall, 2), "mean_instance_s": round(mean, 2)}


def main() -> None:
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    figures: dict[str, object] = {"workers": workers}
    figures["local"] = asyncio.run(measure("local", workers))
    try:
        from agentflow.sandbox.docker import docker_available
        from agentflow.sandbox.image import image_exists

        if docker_available() and image_exists():
            figures["docker"] = asyncio.run(measure("docker", workers))
        else:
            figures["docker"] = "skipped: no Docker engine or sandbox image"
    except Exception as exc:  # noqa: BLE001 - a benchmark reports what it could not measure
        figures["docker"] = f"skipped: {exc}"
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
