"""Localization on a large repository stays fast: the repository map and the ranked windows (the heuristic the
repair runs before every sample's prompt) over the eight real packages of examples/real-tasks taken together
as one repository (each under its own folder), 20k+ lines of Python.

Prints ONE JSON object: files, lines, repo_map_s, rank_s (median of 5 runs each), suspects.
Run: .venv/bin/python benchmarks/localize_speed.py
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from agentflow.repair.config import load_repair_config
from agentflow.repair.edit.steps import suspects
from agentflow.repair.locate.localize import repo_map

ROOT = Path(__file__).resolve().parents[1]
REPOS = ROOT / "examples" / "real-tasks" / "repos"
PACKAGES = ("tabulate-1", "more-itertools-1", "toolz-1", "semver-1", "cachetools-1", "parse-1", "inflection-1", "six-1")


def timed(fn, runs: int = 5) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 4)


def main() -> None:
    sources = {f"{name}/{p.relative_to(REPOS / name)}": p.read_text(encoding="utf-8", errors="replace")
               for name in PACKAGES for p in sorted((REPOS / name).rglob("*.py"))}
    tasks = [json.loads(line) for line in (REPOS.parent / "tasks.jsonl").read_text().splitlines() if line.strip()]
    issue = tasks[0]["problem_statement"]
    cfg = load_repair_config([])
    found = suspects(cfg, sources, issue, "", focus=0)
    print(json.dumps({
        "files": len(sources), "lines": sum(s.count("\n") + 1 for s in sources.values()),
        "repo_map_s": timed(lambda: repo_map(sources)),
        "rank_s": timed(lambda: suspects(cfg, sources, issue, "", focus=0)),
        "suspects": [f"{w.path}:{w.symbol}" for w in found],
    }))


if __name__ == "__main__":
    main()
