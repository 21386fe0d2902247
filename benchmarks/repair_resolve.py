"""Resolve rate of `agentflow bench` on the example tasks with the embedded model, per strategy, at about the
same number of edit samples per task: single (one chain of 3 attempts), best-of-8 (8 one-shot samples) and
MCTS (8 expansions of one sample, chains of up to 2 attempts). Blind mode (the default): the hidden tests only grade the result.

Long: about 15-30 minutes per strategy on a fast 2-core AMD EPYC, over an hour on a slower 2-core Intel Xeon
(Qwen2.5-Coder-1.5B on llama.cpp). Prints one JSON object.
Run: .venv/bin/python benchmarks/repair_resolve.py [STRATEGY ...] [--out DIR] [--workers N] [-c key=value ...]
Each strategy's run directory is kept under --out (default runs/resolve-<date>-<key>, the key a digest of the
arguments that shape the run: tasks file, subset, settings, calls, workflows), so the same command run again
resumes it (`--resume` is passed when the directory holds results) and another one gets its own folder.

Where samples go (per strategy): `samples` is the outcome mix of every model answer (patch: a usable edit; noop:
the code came back unchanged; apply_error: the edit could not be applied or does not parse; unparsable: no
code in the answer), `localization` the share of tasks whose gold function (the task's `gold_functions`, else
the functions its gold patch changes) is among the suspects the search's edits look at (`hit`) or is the first
(`first`), with who put it first before the search merged them: the call-traced run's top five (`trace_first`)
or the model's ranking (`model_first`; per task `trace_position` / `model_position`), and `edit_hit` the share of usable patches that change a gold function. `windows` says where the
samples looked (each candidate's `window`): `on_gold` samples whose window was a gold function, `on_first`
those whose window was the task's first suspect, and the answers that gave their window back unchanged, on a
gold function (`unchanged_on_gold`: the model missed the bug) or elsewhere (`unchanged_elsewhere`: correct code, rightly left alone). `samples.noop_share` is the
share of samples whose answer changed nothing (noop samples / samples). `after_noop` says what became of the
samples drawn after a noop, by the last change their prompt made (`rollout.NOOP_ESCALATION`: `format`,
`failure`, `suspect`), each as the same outcome mix. `test_effect` splits the usable patches by window (a gold
function or elsewhere) and by whether their tests' score moved from the candidate they build on (`moved`) or
stayed (`same`: the change did not reach what the tests check). `per_task.draws` (`per_task_draws` with
`--workflows`) lists a task's samples in the order recorded (`draw_label`: `G 0n 0a 1` is a gold function,
then the first suspect given back unchanged, then an edit there that could not be applied, then the second
suspect).

Test time (per strategy): `test_seconds_per_candidate` (seconds of test runs on candidates, finalists' whole-suite
runs included, per candidate), `test_seconds_per_candidate_before` (an estimate of the same before targeting
and base-timed timeouts: a whole-suite run per distinct patch, 300 s for one that timed out here), `test_seconds_vs_whole_suite` (the same as a share of a whole-suite run on the
unchanged code, which every candidate cost before its tests were targeted) and `max_test_wait_ratio` (the
longest single candidate run over its task's base run).

`--workflows repair,agentless,codemonkeys,swe_search` runs those workflows instead, each as it ships (`repair`
with its shipped search: MCTS over one-edit expansions on a task whose tests fail at the base commit,
`search.when_tests_fail`; `-c search.strategy=...` measures another), at the same model-call limit per task
(`--calls`), and prints one JSON object per workflow (resolved, coverage, calls, tokens, wall), with resolved
per package (`by_package`, the instance id's owner) and per bug kind (`by_bug_kind`, synthesized tasks), and
`limited_by`: each unresolved task under its first cause (test_environment, localization, noop, unusable,
wrong_fix, selection; `what_limited`). On the wide set: `--tasks examples/wide-tasks/tasks.jsonl` (its
repositories built first by examples/wide-tasks/build.py).

`noop_submissions` counts submitted patches that change no code (only docstrings, comments or whitespace) on
tasks whose tests fail at the base commit (outcome.json's `noop` and `base_failed`); `chosen_by` counts `noop`
for tasks where every candidate was such a patch and nothing was submitted.

`--grade-candidates` also grades every candidate of the best-of-8 run with the hidden tests (after the run;
nothing of it reaches the search): `pass_at_1` is the share of candidates that resolve (the expected
resolve rate of a single one-shot run without search) and `coverage` the share of tasks where any of the 8 samples resolves (what a perfect
selection would reach).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "examples" / "swe-tasks" / "tasks.jsonl"
STRATEGIES: dict[str, list[str]] = {
    "single": ["--strategy", "best_of_n", "-n", "1", "-c", "search.max_attempts=3"],
    "best_of_8": ["--strategy", "best_of_n", "-n", "8", "-c", "search.max_attempts=1"],
    "mcts": ["--strategy", "mcts", "-n", "4", "-c", "search.max_attempts=2"],
}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSON-lines file (blank lines skipped): tasks files, candidates.jsonl."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def base_sources(task: dict[str, Any], tasks_file: Path, paths: list[str]) -> dict[str, str]:
    """The files `paths` of a task's repository at its base commit (tasks whose `repo` is a local folder: the
    folder is the base commit's tree, or a git repository holding it)."""
    repo = (tasks_file.parent / task["repo"]).resolve()
    out: dict[str, str] = {}
    for path in paths:
        if not (repo / ".git").exists():
            if (repo / path).is_file():
                out[path] = (repo / path).read_text(encoding="utf-8", errors="replace")
            continue
        shown = subprocess.run(["git", "-C", str(repo), "show", f"{task['base_commit']}:{path}"],
                               capture_output=True, text=True, check=False)
        if shown.returncode == 0:
            out[path] = shown.stdout
    return out


def in_gold(name: str, gold: set[str]) -> bool:
    """`name` (path:qualname) is a gold function or a function nested in one."""
    return any(name == g or name.startswith(g + ".") for g in gold)


def gold_position(names: list[str], gold: set[str]) -> int | None:
    """Where the first gold function stands in `names` (1-based), None when it is not there."""
    return next((i for i, name in enumerate(names, 1) if in_gold(name, gold)), None)


DRAW_MARKS = {"noop": "n", "apply_error": "a", "unparsable": "u"}


def draw_label(row: dict[str, Any], suspects: list[str], on_gold: bool) -> str:
    """A sample as the per-task `draws` show it: `G` on a gold function, else its window's place in the task's
    suspect list (0 first, `?` outside it), then `n` / `a` / `u` for an answer that changed nothing, could not
    be applied, or held no code."""
    place = "G" if on_gold else str(suspects.index(row["window"])) if row["window"] in suspects else "?"
    return place + DRAW_MARKS.get(row["status"], "")


def run_events(run_dir: Path) -> list[dict[str, Any]]:
    """The events a run folder recorded (`events.jsonl`); none for a folder without them."""
    events = run_dir / "events.jsonl"
    return read_jsonl(events) if events.is_file() else []


def suspect_lists(run_dir: Path) -> dict[str, dict[str, list[str]]]:
    """Per task, the suspects of the call-traced run (`repair.spectrum`, its top five) and the model's ranking
    (`repair.rank`) as the run's events recorded them: what each put first, before the search merged them."""
    found: dict[str, dict[str, list[str]]] = {}
    for event in run_events(run_dir):
        data = event.get("data") or {}
        key = {"repair.spectrum": ("trace", "suspects"), "repair.rank": ("model", "ranked")}.get(event.get("kind"))
        if key and data.get("instance_id"):
            found.setdefault(data["instance_id"], {})[key[0]] = list(data.get(key[1]) or [])
    return found


def mutant_steps(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Per task, what `swe.mutants` did (`repair.mutants`): its functions, changes tried of how many, seconds,
    the passing change and what stopped it; tasks where the step did not run are not in it."""
    return {data["instance_id"]: {k: v for k, v in data.items() if k != "instance_id"}
            for event in run_events(run_dir)
            if event.get("kind") == "repair.mutants" and (data := event.get("data") or {}).get("instance_id")}


def base_scores(run_dir: Path) -> dict[str, float]:
    """Per task, the score of the base commit's verification (`repair.base`): what a first edit's tests compare to.
    A task whose event has no score is left out (unknown, not 0)."""
    return {data["instance_id"]: float(data["score"]) for event in run_events(run_dir)
            if event.get("kind") == "repair.base" and (data := event.get("data") or {}).get("instance_id")
            and data.get("score") is not None}


def score_moved(row: dict[str, Any], scores: dict[str, float], base: float | None) -> bool | None:
    """Whether a verified candidate's test score differs from the one it was built on: its parent's in `scores`,
    `base` for a first edit (no parent, or the search's root `<instance>/root`); None when either is unknown."""
    mine = (row.get("verification") or {}).get("score")
    parent_id = row.get("parent_id")
    parent = base if not parent_id or parent_id.endswith("/root") else scores.get(parent_id)
    return None if mine is None or parent is None else abs(float(mine) - parent) > 1e-9


def where_samples_go(run_dir: Path, tasks_file: Path) -> dict[str, object]:
    """The outcome mix of the run's samples, the localization hit rate and the edit hit rate (module doc)."""
    from agentflow.repair.edit.steps import UNCHANGED
    from agentflow.repair.locate.localize import functions_touched
    from agentflow.swe.patch import changed_paths

    tasks = {t["instance_id"]: t for t in read_jsonl(tasks_file)}
    mix = {"patch": 0, "noop": 0, "apply_error": 0, "unparsable": 0}
    located = first = patches = on_target = parts = mutants = 0
    looked = {"on_gold": 0, "on_first": 0, "unchanged_on_gold": 0, "unchanged_elsewhere": 0, "recorded": 0}
    # usable patches whose tests' score stayed where the candidate they build on had it, by window
    effect = {"on_gold": {"same": 0, "moved": 0}, "elsewhere": {"same": 0, "moved": 0}}
    bases = base_scores(run_dir)
    after_noop: dict[str, dict[str, int]] = {}
    per_task: dict[str, object] = {}
    lists = suspect_lists(run_dir)
    firsts = {"trace": [0, 0], "model": [0, 0]}  # [gold first, tasks with that list]
    for inst in sorted((run_dir / "instances").glob("*")):
        if not (inst / "outcome.json").is_file():
            continue
        outcome = json.loads((inst / "outcome.json").read_text())
        task = tasks[outcome["instance_id"]]
        rows = read_jsonl(inst / "candidates.jsonl")
        scores = {r["candidate_id"]: float(r["verification"]["score"]) for r in rows
                  if (r.get("verification") or {}).get("score") is not None}
        parts += sum(1 for r in rows if r.get("part_of"))
        mutants += sum(1 for r in rows if r.get("mutant"))
        # a part of a split edit, and a change made without a model (`swe.mutants`), are no model samples
        rows = [r for r in rows if not r.get("part_of") and not r.get("mutant")]
        for row in rows:
            kind = "patch" if row["status"] == "ok" else row["status"]
            mix[kind] = mix.get(kind, 0) + 1
            if row.get("approach"):  # drawn after a noop: by the last change its prompt made
                changed = after_noop.setdefault(row["approach"][-1], dict.fromkeys(mix, 0))
                changed[kind] = changed.get(kind, 0) + 1
        ok = [r["patch"] for r in rows if r["status"] == "ok"]
        paths = sorted({p for diff in [task["patch"], *ok] for p in changed_paths(diff)})
        sources = base_sources(task, tasks_file, paths)
        gold = set(task.get("gold_functions") or functions_touched(task["patch"], sources))
        suspects = outcome.get("suspects") or []
        hit = any(in_gold(s, gold) for s in suspects)
        located += hit
        first += bool(suspects) and in_gold(suspects[0], gold)
        touching = sum(1 for diff in ok if any(in_gold(f, gold) for f in functions_touched(diff, sources)))
        draws: list[str] = []
        for row in rows:
            if not row.get("window"):
                continue  # a run from before candidates recorded their window
            on_gold = in_gold(row["window"], gold)
            draws.append(draw_label(row, suspects, on_gold))
            looked["on_first"] += bool(suspects) and row["window"] == suspects[0]
            moved = score_moved(row, scores, bases.get(outcome["instance_id"])) if row["status"] == "ok" else None
            if moved is not None:
                effect["on_gold" if on_gold else "elsewhere"]["moved" if moved else "same"] += 1
            unchanged = row["status"] == "noop" and row.get("edit_errors", [])[:1] == [UNCHANGED]
            looked["recorded"] += 1
            looked["on_gold"] += on_gold
            looked["unchanged_on_gold" if on_gold else "unchanged_elsewhere"] += unchanged
        patches += len(ok)
        on_target += touching
        positions = {k: gold_position(v, gold) for k, v in lists.get(outcome["instance_id"], {}).items() if v}
        for source, position in positions.items():
            firsts[source][0] += position == 1
            firsts[source][1] += 1
        per_task[outcome["instance_id"]] = {"gold": sorted(gold), "suspects": suspects, "located": hit,
                                            "patches": len(ok), "edit_hits": touching, "draws": " ".join(draws),
                                            **{f"{k}_position": v for k, v in positions.items()}}
    total = sum(mix.values())
    n = len(per_task)
    return {
        "samples": {**mix, "total": total, **{f"{k}_share": round(v / total, 3) if total else 0.0 for k, v in mix.items()}},
        "after_noop": after_noop,
        "split_parts": parts,
        "mutant_candidates": mutants,  # passing changes made without a model (swe.mutants)
        "localization": {"hit": round(located / n, 3) if n else 0.0, "first": round(first / n, 3) if n else 0.0,
                         "tasks": n,
                         # who put a gold function first: the call-traced run or the model's ranking
                         **{f"{k}_first": round(hit / of, 3) if of else None for k, (hit, of) in firsts.items()}},
        "edit_hit": round(on_target / patches, 3) if patches else 0.0,
        "windows": looked,
        "test_effect": effect,
        "per_task": per_task,
    }


def seeded_subset(ids: list[str], limit: int | None, seed: int, part: int = 1) -> list[str]:
    """`--limit N --seed S`: N of the task ids drawn with seed S (spread over the packages, unlike a slice),
    sorted; [] (every task) without a limit or when it covers them all. `--part K` draws the K-th of disjoint
    subsets: each part is drawn the same way from the ids the earlier parts left, so parts 1..ceil(len/N) of
    one seed cover every task once (part 1 is the plain `--limit` subset) and a set too slow for one sitting
    can be measured in pieces."""
    left = list(ids)
    for k in range(1, part + 1):
        if not left:
            raise ValueError(f"--part {part}: the parts before it cover all {len(ids)} tasks; use a lower --part")
        whole = not limit or limit >= len(left)
        drawn = left if whole else random.Random(seed).sample(left, limit)
        if k == part:
            return [] if whole and k == 1 else sorted(drawn)
        left = [i for i in left if i not in drawn]
    return []


def package_of(instance_id: str) -> str:
    """The package a task belongs to: the repository's owner before `__` in a SWE-bench instance id."""
    return instance_id.split("__", 1)[0]


def what_limited(outcome: dict[str, Any], located: bool, usable: int, covered: bool | None) -> str:
    """Why a task was not resolved, first cause first: the test environment (the task could not be verified),
    localization (no suspect is a gold function), noop (no sample changed code), unusable (samples changed code
    but none applied or parsed), wrong fix (usable patches, none resolves: graded after the run), selection
    (a candidate resolves but another was submitted). None of these when the candidates were not graded."""
    if str(outcome.get("status", "")).startswith(("env_error", "context_exceeded")) or (
            outcome.get("preflight") or {}).get("cause"):  # the pre-flight's cause: why the tests cannot run
        return "test_environment"
    if not located:
        return "localization"
    if not usable:
        return "noop" if outcome.get("samples", 0) and outcome.get("candidates", 0) == 0 else "unusable"
    if covered is None:
        return "wrong_fix_or_selection"
    return "selection" if covered else "wrong_fix"


def breakdown(fig: dict[str, Any], went: dict[str, Any], graded: dict[str, Any] | None, run_dir: Path,
              tasks_file: Path) -> dict[str, object]:
    """Resolved per package and per bug kind (the tasks' `bug_kind`, synthesized tasks), and what limited each
    unresolved task (`what_limited`), with counts: a mechanism is judged across packages, not on one set."""
    tasks = {t["instance_id"]: t for t in read_jsonl(tasks_file)}
    resolved = set(fig["resolved_ids"])
    covered = set(graded["covered_ids"]) if graded else None
    by_package: dict[str, dict[str, int]] = {}
    by_kind: dict[str, dict[str, int]] = {}
    limits: dict[str, list[str]] = {}
    for path in sorted((run_dir / "instances").glob("*/outcome.json")):
        outcome = json.loads(path.read_text())
        iid = outcome["instance_id"]
        won = iid in resolved
        for table, key in ((by_package, package_of(iid)), (by_kind, str(tasks[iid].get("bug_kind", "unknown")))):
            row = table.setdefault(key, {"resolved": 0, "total": 0})
            row["resolved"] += won
            row["total"] += 1
        if won:
            continue
        task = went["per_task"].get(iid, {})
        cause = what_limited(outcome, bool(task.get("located")), int(task.get("patches", 0)),
                             None if covered is None else iid in covered)
        limits.setdefault(cause, []).append(iid)
    return {"by_package": by_package, "by_bug_kind": by_kind,
            "limited_by": {k: {"count": len(v), "ids": v} for k, v in sorted(limits.items())}}


def noop_submissions(outcomes: list[dict[str, Any]]) -> int:
    """Submitted patches that change no code (only docstrings, comments or whitespace) on tasks whose tests fail
    at the base commit: never the fix (outcome.json's `noop` and `base_failed`)."""
    return sum(1 for o in outcomes if o.get("model_patch") and o.get("noop") and o.get("base_failed"))


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
        "noop_submissions": noop_submissions(outcomes),
        "statuses": report.get("statuses", {}),
        "limits": report.get("limits", {}),
        "chosen_by": {k: sum(1 for o in outcomes if str(o.get("chosen_by")) == k)
                      for k in sorted({str(o.get("chosen_by")) for o in outcomes})},
        # what the graph engine and its checkpointer cost: a task's workflow wall time outside its nodes
        "graph_overhead_ratio": round(sum(max(0.0, o.get("graph_s", 0.0) - o.get("nodes_s", 0.0)) for o in outcomes)
                                      / max(1e-9, sum(o.get("duration_s", 0.0) for o in outcomes)), 5),
        **test_time(outcomes, run_dir),
    }


def test_time(outcomes: list[dict[str, Any]], run_dir: Path | None = None) -> dict[str, object]:
    """Where test time went: seconds of candidate test runs per candidate; the same as a share of one whole-suite
    run on the unchanged code (each candidate ran the whole suite before tests were targeted, so that share
    was at least 1); and the longest single candidate run as a multiple of its task's base run.

    `test_seconds_per_candidate_before` estimates the same run's test time as it was before runs were targeted
    and timed from the base: each distinct candidate patch one whole-suite run (the base's duration), or the
    fixed 300 s limit when its run here hit the timeout (a candidate that hangs hangs either way)."""
    timed = [o for o in outcomes if o.get("base_test_seconds")]
    candidates = sum(o.get("candidates", 0) for o in timed)
    seconds = sum(o.get("test_seconds", 0.0) for o in timed)
    whole = sum(o["base_test_seconds"] * o.get("candidates", 0) for o in timed)
    before = sum(_seconds_before(o, run_dir / "instances" / o["instance_id"]) for o in timed) if run_dir else None
    return {
        "test_seconds_per_candidate": round(seconds / candidates, 2) if candidates else 0.0,
        "test_seconds_per_candidate_before": round(before / candidates, 2) if before is not None and candidates
        else None,
        "test_seconds_vs_whole_suite": round(seconds / whole, 3) if whole else 0.0,
        "max_test_wait_ratio": round(max((o.get("longest_test_wait_s", 0.0) / o["base_test_seconds"] for o in timed),
                                         default=0.0), 2),
    }


def _seconds_before(outcome: dict[str, Any], inst: Path, *, ratio: float = 5.0, floor_s: float = 5.0,
                    fixed_s: float = 300.0) -> float:
    """A task's candidate test seconds without targeting and with the fixed timeout (see `test_time`); `ratio`
    and `floor_s` are RepairConfig's defaults (`test_timeout_ratio`, `test_timeout_floor_s`)."""
    base = outcome["base_test_seconds"]
    limit = min(fixed_s, max(floor_s, ratio * base))
    seen: set[str] = set()
    total = 0.0
    for row in read_jsonl(inst / "candidates.jsonl") if (inst / "candidates.jsonl").is_file() else []:
        patch = str(row.get("patch") or "").strip()
        if row.get("status") != "ok" or patch in seen:
            continue
        seen.add(patch)
        ran = float((row.get("verification") or {}).get("seconds") or 0.0)
        total += fixed_s if ran >= 0.98 * limit else base
    return total


GRADE_TIMEOUT_RATIO = 10.0
"""A candidate's grading run may take this many times the longest base test run of the run's tasks: a candidate
that loops in the hidden tests does not resolve, and under the harness's own limit each one would hold up its
round of the grading for that whole limit."""
GRADE_TIMEOUT_FLOOR_S = 120.0
"""The shortest limit of a grading run (the hidden tests' setup and a cold interpreter need a few seconds)."""


def grade_timeout(base_seconds: list[float]) -> float:
    """The wall-clock limit of one candidate's grading run, from the tasks' base test runs (outcome.json)."""
    return max(GRADE_TIMEOUT_FLOOR_S, GRADE_TIMEOUT_RATIO * max(base_seconds, default=0.0))


async def count_resolving(tasks: list[Any], patches: dict[str, list[str]],
                          timeout_s: float | None = None) -> dict[str, int]:
    """How many of each task's patches resolve it, graded with the hidden tests round by round (round r holds
    each task's r-th patch, so the harness runs the tasks of a round in parallel); a run past `timeout_s` (None:
    the harness's limit) does not resolve."""
    limit = {"test_timeout_s": timeout_s} if timeout_s else {}
    from agentflow.swe import EvalConfig, Prediction, evaluate_predictions

    resolved = {iid: 0 for iid in patches}
    for r in range(max((len(v) for v in patches.values()), default=0)):
        preds = [Prediction(instance_id=iid, model_name_or_path="candidate", model_patch=diffs[r])
                 for iid, diffs in patches.items() if r < len(diffs)]
        with tempfile.TemporaryDirectory() as out:
            summary = await evaluate_predictions([t for t in tasks if t.instance_id in patches], preds,
                                                 EvalConfig(workers=2, rerun_failed=False, **limit),
                                                 out_dir=out)
        for iid in summary["resolved_ids"]:
            resolved[iid] += 1
    return resolved


def grade_candidates(run_dir: Path, tasks_file: Path) -> dict[str, object]:
    """Evaluate every candidate of a run with the tasks' hidden tests; return pass@1 over samples and coverage
    over tasks."""
    from agentflow.swe import load_tasks

    per_task: dict[str, list[str]] = {}
    parts: dict[str, list[str]] = {}
    samples: dict[str, int] = {}
    base_seconds: list[float] = []
    for inst in sorted((run_dir / "instances").glob("*")):
        rows = read_jsonl(inst / "candidates.jsonl")
        outcome = json.loads((inst / "outcome.json").read_text())
        base_seconds.append(float(outcome.get("base_test_seconds") or 0.0))
        iid = outcome["instance_id"]
        per_task[iid] = [r["patch"] for r in rows if r["status"] == "ok" and not r.get("part_of")]
        parts[iid] = [r["patch"] for r in rows if r["status"] == "ok" and r.get("part_of")]
        # a single run resamples answers that change nothing, so its submission is one of these candidates
        samples[iid] = len(per_task[iid])
    timeout_s = grade_timeout(base_seconds)
    resolved = asyncio.run(count_resolving(load_tasks(tasks_file), per_task, timeout_s))
    resolved_parts = asyncio.run(count_resolving(load_tasks(tasks_file), parts, timeout_s)) if any(parts.values()) else {}
    total_samples = sum(samples.values())
    covered = {iid for iid, v in resolved.items() if v} | {iid for iid, v in resolved_parts.items() if v}
    return {
        "pass_at_1": round(sum(resolved.values()) / total_samples, 3) if total_samples else 0.0,
        "candidates": total_samples,
        "resolved_samples": sum(resolved.values()),
        "split_parts": sum(len(v) for v in parts.values()),
        "resolved_parts": sum(resolved_parts.values()),
        "coverage": round(len(covered) / len(resolved), 3) if resolved else 0.0,
        "covered_ids": sorted(covered),
    }


def run_bench(argv: list[str], run_dir: Path, args: argparse.Namespace, subset: list[str]) -> tuple[float, int]:
    """`agentflow bench` into `run_dir` (resumed when it holds results) on the subset; (wall seconds, exit code)."""
    for iid in subset:
        argv += ["-i", iid]
    for item in args.config:
        argv += ["-c", item]
    if (run_dir / "instances").is_dir():
        argv.append("--resume")
    start = time.perf_counter()
    proc = subprocess.run(argv, check=False, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=sys.stderr)
    return time.perf_counter() - start, proc.returncode


def run_workflows(args: argparse.Namespace, agentflow: str, subset: list[str]) -> None:
    """`--workflows a,b,c`: each workflow as it ships (its own search and selection) at the same model-call limit
    per task (`--calls`, the run's `step_limit`); one JSON object per workflow: resolved, coverage (tasks where
    any candidate resolves, graded after the run), calls, tokens, wall, and where the samples went."""
    for name in args.workflows.split(","):
        run_dir = Path(args.out) / f"workflow-{name}"
        argv = [agentflow, "bench", args.tasks, "--workflow", name,
                "--workers", str(args.workers), "-o", str(run_dir), "-c", f"limits.step_limit={args.calls}"]
        wall, code = run_bench(argv, run_dir, args, subset)
        if not (run_dir / "report.json").is_file():
            print(json.dumps({"workflow": name, "error": f"agentflow bench exited {code} without a report"}))
            continue
        fig = figures(run_dir, wall)
        went = where_samples_go(run_dir, Path(args.tasks))
        graded = grade_candidates(run_dir, Path(args.tasks))
        print(json.dumps({"workflow": name, "model": "local:qwen2.5-coder-1.5b", "calls_per_task": args.calls,
                          "subset": subset or "all", "resolved": fig["resolved"], "total": fig["total"],
                          "resolved_ids": fig["resolved_ids"], "coverage": graded["coverage"],
                          "covered_ids": graded["covered_ids"],
                          "model_calls_mean": fig["model_calls_mean"], "tokens": fig["tokens"], "wall_s": fig["wall_s"],
                          "statuses": fig["statuses"], "limits": fig["limits"], "chosen_by": fig["chosen_by"],
                          "noop_submissions": fig["noop_submissions"], "samples": went["samples"],
                          "after_noop": went["after_noop"], "mutant_candidates": went["mutant_candidates"],
                          "mutant_steps": mutant_steps(run_dir),
                          "localization": went["localization"], "edit_hit": went["edit_hit"],
                          "windows": went["windows"], "test_effect": went["test_effect"],
                          "per_task_draws": {iid: task["draws"] for iid, task in went["per_task"].items()},
                          **breakdown(fig, went, graded, run_dir, Path(args.tasks))}), flush=True)


def run_key(args: argparse.Namespace) -> str:
    """A short digest of the arguments that shape a run (not --out, --workers or --grade-candidates, which only
    reads a finished run): a run folder of its own."""
    shaping = {k: v for k, v in sorted(vars(args).items()) if k not in ("out", "workers", "grade_candidates")}
    return hashlib.sha256(json.dumps(shaping, sort_keys=True, default=str).encode()).hexdigest()[:8]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("strategies", nargs="*", default=list(STRATEGIES))
    parser.add_argument("--out", default=None, help="run folder (default: runs/resolve-<date>-<key of the arguments>)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("-c", dest="config", action="append", default=[])
    parser.add_argument("--grade-candidates", action="store_true")
    parser.add_argument("--workflow", default=None, help="a repair workflow (name or YAML path) for every strategy")
    parser.add_argument("--tasks", default=str(TASKS), help="tasks file (default: the 15 example tasks)")
    parser.add_argument("--limit", type=int, default=None,
                        help="a fixed subset of N tasks, drawn with --seed (spread over the packages, unlike a slice)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the --limit subset")
    parser.add_argument("--part", type=int, default=1,
                        help="with --limit: the K-th of disjoint seeded subsets (parts 1, 2, ... cover every task once)")
    parser.add_argument("--workflows", default=None,
                        help="comma-separated workflows (e.g. repair,agentless,codemonkeys,swe_search) side by side at "
                             "--calls model calls per task: one JSON object per workflow, instead of the strategies")
    parser.add_argument("--calls", type=int, default=12, help="--workflows: model calls per task (step_limit)")
    args = parser.parse_args()
    if args.out is None:
        args.out = str(ROOT / "runs" / f"resolve-{time.strftime('%Y%m%d')}-{run_key(args)}")
    agentflow = str(Path(sys.executable).parent / "agentflow")
    ids = [t["instance_id"] for t in read_jsonl(Path(args.tasks))]
    if args.part < 1 or (args.part > 1 and not args.limit):
        parser.error("--part K takes K >= 1 and needs --limit N (the size of each part)")
    try:
        subset = seeded_subset(ids, args.limit, args.seed, args.part)
    except ValueError as exc:
        parser.error(str(exc))
    if args.workflows:
        run_workflows(args, agentflow, subset)
        return
    result: dict[str, object] = {"model": "local:qwen2.5-coder-1.5b", "tasks": args.tasks,
                                 "workers": args.workers, "config": args.config, "workflow": args.workflow or "repair",
                                 "subset": subset or "all"}
    for name in args.strategies:
        run_dir = Path(args.out) / name
        argv = [agentflow, "bench", args.tasks, *STRATEGIES[name], "--workers", str(args.workers), "-o", str(run_dir)]
        if args.workflow:
            argv += ["--workflow", args.workflow]
        wall, code = run_bench(argv, run_dir, args, subset)
        if not (run_dir / "report.json").is_file():
            result[name] = {"error": f"agentflow bench exited {code} without a report"}
            continue
        result[name] = figures(run_dir, wall) | where_samples_go(run_dir, Path(args.tasks))
        if args.grade_candidates:
            result[name]["candidates"] = grade_candidates(run_dir, Path(args.tasks))  # type: ignore[index]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
