"""benchmarks/repair_resolve.py's test-time keys, read from a run folder as `agentflow bench` writes it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.swe_fixtures import resolve_bench


def _candidate(patch: str, seconds: float) -> str:
    return json.dumps({"status": "ok", "patch": patch, "verification": {"seconds": seconds}})


def test_the_estimate_before_charges_a_whole_suite_per_distinct_patch_and_300_s_per_timeout(tmp_path: Path):
    inst = tmp_path / "instances" / "t-1"
    inst.mkdir(parents=True)
    # base 2 s: the timeout here was 10 s; b hit it, a twice the same patch, c an unusable answer
    rows = [_candidate("a", 0.5), _candidate("a", 0.5), _candidate("b", 10.0),
            json.dumps({"status": "noop", "patch": "", "verification": None})]
    (inst / "candidates.jsonl").write_text("\n".join(rows) + "\n")
    outcome = {"instance_id": "t-1", "candidates": 3, "test_seconds": 10.5, "base_test_seconds": 2.0,
               "longest_test_wait_s": 10.0}
    found = resolve_bench().test_time([outcome], tmp_path)
    assert found["test_seconds_per_candidate"] == 3.5
    assert found["test_seconds_per_candidate_before"] == round((2.0 + 300.0) / 3, 2)
    assert found["test_seconds_vs_whole_suite"] == round(10.5 / 6.0, 3)
    assert found["max_test_wait_ratio"] == 5.0
    assert resolve_bench().test_time([outcome])["test_seconds_per_candidate_before"] is None  # no folder, no estimate


def test_a_candidates_grading_run_is_limited_by_the_slowest_base_run_with_a_floor():
    bench = resolve_bench()
    # a 78 s suite beside sub-second ones: its candidates get ten times it, so a correct one is not cut short
    assert bench.grade_timeout([0.7, 78.0, 0.5]) == 780.0
    # quick suites (or tasks whose base run never happened): the floor, far under the harness's 900 s
    assert bench.grade_timeout([0.8, 0.6]) == bench.GRADE_TIMEOUT_FLOOR_S
    assert bench.grade_timeout([]) == bench.GRADE_TIMEOUT_FLOOR_S
