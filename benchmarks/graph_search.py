"""What a graph search costs beyond its nodes; prints ONE JSON object.

An MCTS search node over a two-node subgraph (`work`: one sandbox command that edits a file of a ~10 MB
repository, then a wait standing in for a model call; `score`: a value) runs in a Docker sandbox, twice:
- concurrently (2 expansions in flight, so branches take turns in the sandbox and switch workspaces): per
  expansion, the restore of checkpoint plus workspace = building the branch's graph and copying its
  parent's checkpoint into its thread (`setup_ms`) + the first switch of the sandbox to its workspace
  (`restore_ms`), both from the `search.branch` events;
- one expansion at a time: the engine's own time = the search node's wall time minus the time inside the
  branches' nodes, as a share of the wall time (with `--node-seconds` standing in for a model call).

Run: .venv/bin/python benchmarks/graph_search.py [--expansions 12] [--node-seconds 10]   (a local model call: 10-60 s)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]


def make_repo(root: Path) -> float:
    """~10 MB of Python-like files in 20 packages (as benchmarks/sandbox.py), returns its size in MB."""
    rng = random.Random(7)
    words = ["".join(rng.choice("abcdefghij") for _ in range(6)) for _ in range(500)]
    for d in range(20):
        pkg = root / f"pkg{d}"
        pkg.mkdir(parents=True)
        for f in range(20):
            lines = (" ".join(rng.choices(words, k=12)) for _ in range(300))
            (pkg / f"mod{f}.py").write_text("\n".join(lines) + "\n")
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) / 1e6


async def work(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    k = int(str(ctx.run.branch).rsplit("~", 1)[-1][1:])
    await ctx.run.sandbox.exec(f"echo 'change {k}' >> pkg{k % 20}/mod{k % 7}.py")
    await asyncio.sleep(float(state["node_seconds"]))  # a model call's wait
    return {"depth": int(state.get("depth") or 0) + 1}


def score(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    k = int(str(ctx.run.branch).rsplit("~", 1)[-1][1:])
    depth = int(state["depth"])
    return {"score": (k * 37) % 10, "verdict": "more" if depth < 3 else "stop"}


def workflow(expansions: int, concurrency: int) -> dict[str, Any]:
    return {
        "name": "bench_search",
        "state": {"node_seconds": {"type": "float"}, "depth": {"type": "int"}, "score": {"type": "int"},
                  "verdict": {"type": "str"}, "report": {"type": "dict"}},
        "nodes": {"search": {
            "search": {"strategy": "mcts", "n": expansions, "expand": 2, "concurrency": concurrency,
                       "value": "score", "value_scale": 10, "step_until": ["score"]},
            "output": "report", "next": "END",
            "subgraph": {"name": "step", "nodes": {
                "work": {"fn": work, "next": "score"},
                "score": {"fn": score, "route": {"on": "verdict", "cases": {"more": "work", "stop": "END"}}}}}}},
    }


async def run_search(repo: Path, run_dir: Path, expansions: int, concurrency: int, node_seconds: float) -> list[Any]:
    from agentflow.events import EventLog
    from agentflow.graph import WorkflowRunner
    from agentflow.graph.define.loader import spec_from_dict
    from agentflow.graph.run.context import RunHandles

    events = EventLog(run_dir / "events.jsonl")
    spec = spec_from_dict(workflow(expansions, concurrency), source=str(run_dir / "bench.yaml"))
    async with WorkflowRunner(spec, run_dir=run_dir, context=RunHandles(events=events), sandbox="docker",
                              workspace=repo) as runner:
        result = await runner.start({"node_seconds": node_seconds})
        assert result.status == "done", result.errors
    events.close()
    return list(events.events)


def search_wall_and_node_time(events: list[Any]) -> tuple[float, float]:
    start = next(e.ts for e in events if e.kind == "node.start" and e.node_id == "search")
    end = next(e.ts for e in events if e.kind == "node.end" and e.node_id == "search")
    open_: dict[tuple[str, str], float] = {}
    busy = 0.0
    for e in events:
        if not e.data.get("branch"):
            continue
        key = (e.data["branch"], e.node_id or "")
        if e.kind == "node.start":
            open_[key] = e.ts
        elif e.kind == "node.end" and key in open_:
            busy += e.ts - open_.pop(key)
    return end - start, busy


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expansions", type=int, default=12)
    parser.add_argument("--node-seconds", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="af-bench-search-") as tmp:
        repo = Path(tmp) / "repo"
        size_mb = make_repo(repo)
        concurrent = await run_search(repo, Path(tmp) / "concurrent", args.expansions, 2, args.node_seconds)
        serial = await run_search(repo, Path(tmp) / "serial", args.expansions, 1, args.node_seconds)
    ends = [e.data for e in concurrent if e.kind == "search.branch" and e.data.get("event") == "end"]
    restore = [d["setup_ms"] + d["restore_ms"] for d in ends]
    wall, busy = search_wall_and_node_time(serial)
    print(json.dumps({
        "repo_mb": round(size_mb, 1),
        "expansions": len(ends),
        "expansion_restore_ms_p50": round(statistics.median(restore), 1),
        "expansion_restore_ms_p90": round(pct(restore, 0.9), 1),
        "setup_ms_p50": round(statistics.median(d["setup_ms"] for d in ends), 1),
        "workspace_restore_ms_p50": round(statistics.median(d["restore_ms"] for d in ends if d["restore_ms"]), 1)
        if any(d["restore_ms"] for d in ends) else 0.0,
        "node_seconds": args.node_seconds,
        "serial_search_wall_s": round(wall, 2),
        "graph_overhead_pct": round(100 * (wall - busy) / wall, 2),
        "graph_overhead_ms_per_expansion": round(1000 * (wall - busy) / max(1, args.expansions), 1),
    }))


if __name__ == "__main__":
    t0 = time.perf_counter()
    asyncio.run(main())
