"""benchmarks/repair_resolve.py's breakdown: resolved per package and per bug kind, and what limited each
unresolved task, read from run folders as `agentflow bench` writes them (every cause generated)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from tests.swe_fixtures import resolve_bench

# (outcome fields, located, usable patches, covered) -> the cause the benchmark names
CASES = [
    ("test_environment", ({"status": "env_error"}, True, 1, True)),
    ("test_environment",
     ({"status": "no_patch", "preflight": {"cause": "the package does not import"}}, True, 0, False)),
    ("localization", ({"status": "submitted", "samples": 3, "candidates": 1}, False, 1, False)),
    ("noop", ({"status": "no_patch", "samples": 4, "candidates": 0}, True, 0, False)),
    ("unusable", ({"status": "no_patch", "samples": 4, "candidates": 2}, True, 0, False)),
    ("wrong_fix", ({"status": "submitted", "samples": 4, "candidates": 2}, True, 2, False)),
    ("selection", ({"status": "submitted", "samples": 4, "candidates": 2}, True, 2, True)),
]


def test_each_unresolved_task_is_counted_under_its_first_cause_per_package_and_kind(tmp_path: Path):
    bench = resolve_bench()
    packages, kinds = ["alpha", "beta", "gamma"], ["flip-comparison", "off-by-one"]
    tasks, per_task, covered, resolved, expected = [], {}, [], [], {}
    for n, ((cause, (fields, located, usable, cov)), package, kind) in enumerate(
            itertools.product(CASES, packages, kinds)):
        iid = f"{package}__{package}-{n}"
        tasks.append({"instance_id": iid, "bug_kind": kind})
        inst = tmp_path / "instances" / iid
        inst.mkdir(parents=True)
        (inst / "outcome.json").write_text(json.dumps({"instance_id": iid, **fields}))
        per_task[iid] = {"located": located, "patches": usable}
        if cov:
            covered.append(iid)
        expected.setdefault(cause, []).append(iid)
    won = f"{packages[0]}__{packages[0]}-won"  # one resolved task: counted per package, never as limited
    tasks.append({"instance_id": won, "bug_kind": kinds[0]})
    (tmp_path / "instances" / won).mkdir()
    (tmp_path / "instances" / won / "outcome.json").write_text(json.dumps({"instance_id": won, "status": "submitted"}))
    resolved.append(won)
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t) + "\n" for t in tasks))

    found = bench.breakdown({"resolved_ids": resolved}, {"per_task": per_task}, {"covered_ids": covered + [won]},
                            tmp_path, tasks_file)
    assert {k: sorted(v["ids"]) for k, v in found["limited_by"].items()} == {k: sorted(v) for k, v in expected.items()}
    assert all(v["count"] == len(v["ids"]) for v in found["limited_by"].values())
    per_cause = len(packages) * len(kinds)
    assert found["by_package"][packages[0]] == {"resolved": 1, "total": len(CASES) * len(kinds) + 1}
    assert found["by_package"][packages[1]] == {"resolved": 0, "total": len(CASES) * len(kinds)}
    assert found["by_bug_kind"][kinds[1]] == {"resolved": 0, "total": len(CASES) * len(packages)}
    assert sum(v["count"] for v in found["limited_by"].values()) == len(CASES) * per_cause

    ungraded = bench.breakdown({"resolved_ids": resolved}, {"per_task": per_task}, None, tmp_path, tasks_file)
    merged = expected["wrong_fix"] + expected["selection"]
    assert sorted(ungraded["limited_by"]["wrong_fix_or_selection"]["ids"]) == sorted(merged)
