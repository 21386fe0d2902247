"""The viewer's figures match the run's files: a failed node is red with its reason (not amber "running 0×"),
configured limits are shown as configured, a resumed run has no negative (or gap-spanning) durations, a
submitted task that nothing graded is "not graded" (not a failure), and a candidate that failed says why.

Workflow runs are real `agentflow run`s with a replayed model (one killed with -9 and resumed); the bench
folder is written by the repair's own writers (`InstanceOutcome`, `Candidate`, `write_summaries`, `EventLog`)."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from agentflow.cli.main import run
from agentflow.events.kinds import RepairEnd, RepairStart, RunEnd, RunStart

from .conftest import console_errors
from .test_viewer import open_view

ROOT = Path(__file__).resolve().parents[2]
CRASH = ROOT / "tests" / "graph" / "crash.yaml"


def _node_state(browser: Any, node: str) -> tuple[str, str]:
    (group,) = browser.find_elements("css selector", f"svg.graph g[data-node='{node}']")
    return group.get_attribute("class"), group.text


def _budget(browser: Any) -> dict[str, tuple[str, str]]:
    """The budget table as {row: (used, limit)} (the first table of the overview)."""
    rows = browser.find_elements("css selector", "main table")[0].find_elements("css selector", "tbody tr")
    cells = [[td.text for td in r.find_elements("css selector", "td")] for r in rows]
    return {c[0]: (c[1], c[2]) for c in cells}


def _seconds(text: str) -> float:
    number, unit = re.fullmatch(r"(-?[\d.]+) (ms|s|min)", text).groups()  # type: ignore[union-attr]
    return float(number) * {"ms": 0.001, "s": 1.0, "min": 60.0}[unit]


def _cassette(path: Path, replies: list[str]) -> Path:
    inter = [{"response": {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                           "usage": {"input_tokens": 10, "output_tokens": 5}}} for text in replies]
    path.write_text(json.dumps({"version": 1, "match": "sequence", "interactions": inter}))
    return path


def test_a_failed_node_is_red_with_its_reason_and_the_limits_are_as_configured(browser: Any, tmp_path: Path) -> None:
    spec = {"name": "fails", "state": {"task": {"type": "str"}, "critique": {"type": "dict"}},
            "nodes": {"review": {"agent": "critic", "output": "critique", "next": "END",
                                 "args": {"input": {"task": "task", "summary": "task"},
                                          "config": {"output_retries": 0}}}}}
    wf = tmp_path / "fails.yaml"
    wf.write_text(yaml.safe_dump(spec))
    cassette = _cassette(tmp_path / "c.json", ["this is not JSON"])
    assert run(["run", str(wf), "-m", f"replay:{cassette}", "-i", '{"task": "t"}', "-o", str(tmp_path / "runs"),
                "--sandbox", "none", "--budget-usd", "2", "--step-limit", "9", "--wall-time", "90s",
                "-c", "step_limit=40"]) == 1
    (run_dir,) = [p.parent for p in (tmp_path / "runs").glob("*/run.json")]
    open_view(browser, run_dir)
    cls, text = _node_state(browser, "review")
    assert cls == "failed" and text.startswith("review\nfailed · 1×"), (cls, text)
    reason = browser.find_element("css selector", "[data-failed-node='review']").text
    assert "not readable as Critique" in reason
    budget = _budget(browser)
    assert budget["model calls"] == ("1", "9")
    assert budget["cost (USD)"][1] == "2" and budget["wall time (s)"][1] == "90"
    assert budget["node runs (super-step limit)"] == ("1", "40")
    usage = json.loads((run_dir / "usage.json").read_text())  # the budget's own count is what the table shows
    assert float(budget["wall time (s)"][0]) == round(usage["wall_seconds"], 4)
    assert console_errors(browser) == []


def _crash_and_resume(runs: Path, effects: Path) -> Path:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AF_TEST_PAUSE_AT": "1"}
    argv = [sys.executable, "-m", "agentflow.cli.main", "run", str(CRASH), "--json", "-o", str(runs)]
    proc = subprocess.Popen([*argv, "--thread-id", "crashy", "--step-limit", "7", "--wall-time", "10m", "--input",
                             json.dumps({"effects": str(effects), "rounds": 3})],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ready = Path(str(effects) + ".ready")
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the run never reached its pause"
        time.sleep(0.05)
    time.sleep(0.5)  # a gap between the crashed leg's last event and the resume
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    del env["AF_TEST_PAUSE_AT"]
    resumed = subprocess.run([*argv, "--resume", "crashy"], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=120, check=False)
    assert resumed.returncode == 0, resumed.stderr
    (run_dir,) = [p.parent for p in runs.glob("*/run.json")]
    return run_dir


def _legs_seconds(events: list[dict[str, Any]]) -> float:
    """Run time as legs: the first from the first event, each later one from its run.resume, to the last event
    before the next leg."""
    bounds = [0, *(i for i, e in enumerate(events) if e["kind"] == "run.resume"), len(events)]
    return sum(events[b - 1]["ts"] - events[a]["ts"] for a, b in itertools.pairwise(bounds))


def test_a_resumed_run_has_no_negative_durations_and_counts_no_gap(browser: Any, tmp_path: Path) -> None:
    run_dir = _crash_and_resume(tmp_path / "runs", tmp_path / "effects.txt")
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in events].count("run.resume") == 1
    open_view(browser, run_dir)
    metas = [m.text for m in browser.find_elements("css selector", "#timeline .tl-meta")]
    durations = [_seconds(m.split(" · ")[0]) for m in metas]
    assert durations and min(durations) >= 0, metas
    gap = events[[e["kind"] for e in events].index("run.resume")]["ts"] - events[0]["ts"]
    assert max(durations) < gap, metas  # no span reaches across the crash
    labels = [r.text.split("\n")[0] for r in browser.find_elements("css selector", "#timeline .tl-row")]
    cut = [label for label, meta in zip(labels, metas, strict=True) if "cut short" in meta]
    assert cut == ["crash run", "node work"], list(zip(labels, metas, strict=True))  # the killed leg's open spans
    cls, text = _node_state(browser, "work")
    assert cls == "done" and "3×" in text  # three rounds ended; the killed attempt is not a run
    budget = _budget(browser)
    assert budget["model calls"][1] == "7" and budget["wall time (s)"][1] == "600"
    card = next(c for c in browser.find_elements("css selector", ".cards .card") if "wall time" in c.text)
    assert "2 legs" in card.text
    shown = _seconds(card.find_element("css selector", "b").text)
    assert abs(shown - _legs_seconds(events)) < 0.05 + 0.05 * shown, (shown, _legs_seconds(events))
    assert console_errors(browser) == []


def _bench_folder(out: Path) -> Path:
    """Two tasks as a bench writes them: one graded and resolved after a failed first candidate, one submitted
    from a repository without the task's tests (nothing graded it), whose only other candidate did not apply."""
    from agentflow.repair.config import RepairConfig
    from agentflow.repair.outcome import Candidate, InstanceOutcome
    from agentflow.repair.run.runs import instance_dir, write_summaries
    from agentflow.repair.verify.workbench import Verification
    from agentflow.rundir import RunDir
    from agentflow.swe.tasks import SWETask

    cfg = RepairConfig.model_validate({"model": "replay:x.json", "limits": {"step_limit": 30, "wall_time_s": 600, "run_budget_usd": 2.5}})
    rundir = RunDir.create(out)
    rundir.write_config(cfg)
    graded, blind = "pkg__pkg-1", "own__repo-1"
    tasks = [SWETask(instance_id=i, repo="x/y", base_commit="abcd", FAIL_TO_PASS=["t::a"]) for i in (graded, blind)]
    failing = {"FAIL_TO_PASS": {"success": [], "failure": ["tests/test_a.py::test_bug"]},
               "PASS_TO_PASS": {"success": ["tests/test_a.py::test_ok"], "failure": ["tests/test_a.py::test_other"]}}
    passing = {"FAIL_TO_PASS": {"success": ["tests/test_a.py::test_bug"], "failure": []},
               "PASS_TO_PASS": {"success": ["tests/test_a.py::test_ok", "tests/test_a.py::test_other"], "failure": []}}
    patch = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    cands = {
        graded: [
            Candidate(instance_id=graded, candidate_id=f"{graded}/c1", parent_id=None, status="ok", patch=patch,
                      verification=Verification(passed=False, score=0.5, kind="task_tests", tests_status=failing)),
            Candidate(instance_id=graded, candidate_id=f"{graded}/c2", parent_id=f"{graded}/c1", status="ok",
                      patch=patch, verification=Verification(passed=True, score=1.0, kind="task_tests",
                                                             tests_status=passing)),
        ],
        blind: [
            Candidate(instance_id=blind, candidate_id=f"{blind}/c1", parent_id=None, status="apply_error",
                      edit_errors=["SEARCH block not found in a.py"]),
            Candidate(instance_id=blind, candidate_id=f"{blind}/c2", parent_id=None, status="ok", patch=patch,
                      verification=Verification(passed=False, kind="test_cmd", exit_code=2,
                                                output="ModuleNotFoundError: No module named 'own'\nmore")),
        ],
    }
    outcomes = {
        graded: InstanceOutcome(instance_id=graded, status="submitted", model_patch=patch, chosen=f"{graded}/c2",
                                chosen_by="tests", report={"resolved": True, "completed": True,
                                                           "patch_successfully_applied": True,
                                                           "tests_status": passing}),
        blind: InstanceOutcome(instance_id=blind, status="submitted", model_patch=patch, chosen=f"{blind}/c2",
                               chosen_by="only", report=None),
    }
    with rundir.events() as events:
        events.write(RunStart(total=2, todo=2, resume=False, search="best_of_n, n=4", executor="in-process"))
        for iid, outcome in outcomes.items():
            events.write(RepairStart(node_id=iid, instance_id=iid, search="best_of_n, n=4", model=cfg.model,
                                     workflow="repair", expected_calls={}, step_limit=None, wall_time_s=None))
            events.write(RepairEnd(node_id=iid, instance_id=iid, status=outcome.status, chosen=outcome.chosen, chosen_by=outcome.chosen_by, resolved=(outcome.report or {}).get("resolved"), error=None))
            inst = RunDir.create(instance_dir(out, iid))
            inst.write_json("outcome.json", outcome.model_dump(mode="json"), indent=2)
            inst.write_text("candidates.jsonl", "".join(c.model_dump_json() + "\n" for c in cands[iid]), code=True)
        summary = write_summaries(out, tasks, cfg)
        events.write(RunEnd(resolved=summary["resolved_instances"], statuses=summary["statuses"]))
    return out


def test_a_bench_shows_ungraded_tasks_as_such_and_why_candidates_failed(browser: Any, tmp_path: Path) -> None:
    run_dir = _bench_folder(tmp_path / "bench")
    open_view(browser, run_dir)
    rows = {r.get_attribute("data-instance"): r.text for r in browser.find_elements("css selector", "#instances tbody tr")}
    assert "submitted yes" in rows["pkg__pkg-1"]
    assert "submitted not graded" in rows["own__repo-1"] and " no " not in f" {rows['own__repo-1']} "
    cards = browser.find_element("css selector", ".cards").text
    assert "1/2 resolved (1 not graded)" in cards and "submitted 2" in cards
    budget = _budget(browser)
    assert budget["model calls"][1] == "30 per task" and budget["wall time (s)"][1] == "600 per task"
    assert budget["cost (USD)"][1] == "no limit · 2.5 whole run"

    def why_not(iid: str) -> dict[str, str]:
        browser.get((run_dir / "view.html").resolve().as_uri() + "#inst=" + iid)
        browser.refresh()
        deadline = time.monotonic() + 5
        while not browser.find_elements("css selector", "main table tbody tr"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        table = next(t for t in browser.find_elements("css selector", "main table") if "why not" in t.text)
        cells = [[td.text for td in r.find_elements("css selector", "td")] for r in
                 table.find_elements("css selector", "tbody tr")]
        return {c[0].rsplit("/", 1)[1]: c[5] for c in cells}

    graded = why_not("pkg__pkg-1")
    assert graded == {"c1": "2 tests failing: tests/test_a.py::test_bug (FAIL_TO_PASS) and 1 more", "c2": ""}
    blind = why_not("own__repo-1")
    assert blind["c1"] == "the edit did not apply: SEARCH block not found in a.py"
    assert blind["c2"] == "the test command exited 2: ModuleNotFoundError: No module named 'own'"
    assert browser.find_elements("css selector", ".cards .card")[1].text.startswith("not graded")
    assert console_errors(browser) == []
