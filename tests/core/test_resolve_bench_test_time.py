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
