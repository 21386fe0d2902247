"""benchmarks/repair_resolve.py's breakdown: resolved per package and per bug kind, and what limited each
unresolved task, read from run folders as `agentflow bench` writes them (every cause generated)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

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


def test_who_put_the_gold_function_first_is_read_from_the_runs_events(tmp_path: Path):
    """Every position of the gold function in the call-traced run's suspects and in the model's ranking (or its
    absence) is read back from events as `agentflow bench` writes them."""
    bench = resolve_bench()
    gold = {"pkg/mod.py:Thing.fix"}
    others = [f"pkg/mod.py:other_{i}" for i in range(5)]
    events, expected = [], {}
    for trace_at, model_at in itertools.product([None, 1, 3], [None, 1, 2]):
        iid = f"pkg__pkg-{trace_at}-{model_at}"
        trace = others[:4] if trace_at is None else [*others[: trace_at - 1], "pkg/mod.py:Thing.fix.inner", *others[:2]]
        model = others[:2] if model_at is None else [*others[: model_at - 1], "pkg/mod.py:Thing.fix"]
        events += [{"kind": "repair.spectrum", "data": {"instance_id": iid, "suspects": trace}},
                   {"kind": "repair.rank", "data": {"instance_id": iid, "ranked": model}},
                   {"kind": "repair.start", "data": {"instance_id": iid}}]
        expected[iid] = (trace_at, model_at)
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    lists = bench.suspect_lists(tmp_path)
    found = {iid: (bench.gold_position(v["trace"], gold), bench.gold_position(v["model"], gold))
             for iid, v in lists.items()}
    assert found == expected
    assert bench.suspect_lists(tmp_path / "no-run") == {}


def test_what_the_mutants_step_did_is_read_per_task_from_the_events_a_repair_writes(tmp_path: Path):
    """`mutant_steps` reads each task's `repair.mutants` event as the repair's event log writes it; a task
    whose step did not run (the tests passed at the base) is not in it."""
    from agentflow.events import EventLog
    from agentflow.events.kinds import RepairMutants, RepairRank

    bench = resolve_bench()
    log = EventLog(tmp_path / "events.jsonl")
    log.write(RepairMutants(node_id="a", instance_id="a", functions=["p.py:f"], changes=9, tried=3, seconds=2.5,
                            passed="a/mutant.3", stopped="passed"))
    log.write(RepairRank(node_id="b", instance_id="b", ranked=["p.py:g"]))
    log.write(RepairMutants(node_id="c", instance_id="c", functions=["p.py:f", "q.py:h"], changes=90, tried=80,
                            seconds=100.0, passed=None, stopped="limit"))
    log.close()
    steps = bench.mutant_steps(tmp_path)
    assert sorted(steps) == ["a", "c"]
    assert (steps["a"]["passed"], steps["a"]["tried"], steps["a"]["stopped"]) == ("a/mutant.3", 3, "passed")
    assert (steps["c"]["passed"], steps["c"]["functions"], steps["c"]["stopped"]) == (None, ["p.py:f", "q.py:h"], "limit")


def test_parts_of_a_seeded_subset_are_disjoint_and_cover_every_task_once():
    bench = resolve_bench()
    for n, limit in [(30, 10), (23, 10), (7, 3)]:
        ids = [f"pkg{i % 4}__pkg{i % 4}-{i}" for i in range(n)]
        parts = [bench.seeded_subset(ids, limit, 0, k) for k in range(1, -(-n // limit) + 1)]
        assert parts[0] == bench.seeded_subset(ids, limit, 0)  # part 1 is the plain --limit subset
        assert sorted(i for p in parts for i in p) == sorted(ids)
        assert all(len(p) == limit for p in parts[:-1]) and parts[-1]
        assert parts == [bench.seeded_subset(ids, limit, 0, k) for k in range(1, len(parts) + 1)]
    thirty = [f"pkg{i % 4}__pkg{i % 4}-{i}" for i in range(30)]
    assert len({tuple(bench.seeded_subset(thirty, 10, seed, 2)) for seed in range(4)}) > 1  # the seed decides
    with pytest.raises(ValueError, match="--part 4"):  # parts 1-3 of 3 cover all 7
        bench.seeded_subset(ids, 3, 0, 4)


def test_a_patch_moved_the_tests_when_its_score_differs_from_the_candidate_it_builds_on(tmp_path: Path):
    """A candidate's score is compared with its parent's, a first edit's (no parent, or the search's root) with
    the base's (`repair.base`); either one unknown (a base event without a score, a parent not recorded) gives no
    answer."""
    bench = resolve_bench()
    events = [{"kind": "repair.base", "data": {"instance_id": "pkg__pkg-1", "score": 0.5}},
              {"kind": "repair.base", "data": {"instance_id": "pkg__pkg-2"}},
              {"kind": "repair.start", "data": {"instance_id": "pkg__pkg-1"}}]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    bases = bench.base_scores(tmp_path)
    assert bases == {"pkg__pkg-1": 0.5}
    scores = {"b1": 0.5, "b2": 0.75}
    for parent, mine, base, moved in [(None, 0.5, 0.5, False), (None, 0.75, 0.5, True), ("b1", 0.5, 0.0, False),
                                      ("b2", 0.5, 0.75, True), ("b9", 0.5, None, None), ("b9", 0.5, 0.5, None),
                                      ("pkg__pkg-1/root", 0.5, 0.75, True), (None, None, 0.5, None)]:
        row = {"parent_id": parent, "verification": {"score": mine}}
        assert bench.score_moved(row, scores, base) is moved, (parent, mine, base)
    assert bench.base_scores(tmp_path / "no-run") == {}


def test_a_sample_is_labelled_by_its_windows_place_and_its_outcome():
    """Every outcome on every kind of window: a gold function is `G` wherever it ranks, another suspect its place
    in the list, a window outside the list `?`; a usable edit has no mark."""
    bench = resolve_bench()
    suspects = ["pkg/mod.py:fix", "pkg/mod.py:other", "pkg/mod.py:third"]
    marks = {"ok": "", "noop": "n", "apply_error": "a", "unparsable": "u"}
    for (window, place), (status, mark) in itertools.product(
            [("pkg/mod.py:fix", "G"), ("pkg/mod.py:other", "1"), ("pkg/mod.py:third", "2"), ("pkg/x.py:y", "?")],
            marks.items()):
        row = {"window": window, "status": status}
        assert bench.draw_label(row, suspects, window == "pkg/mod.py:fix") == place + mark, (window, status)
    assert bench.draw_label({"window": "pkg/mod.py:other", "status": "ok"}, suspects, False) == "1"
    assert bench.draw_label({"window": "pkg/mod.py:fix", "status": "noop"}, suspects, False) == "0n"
