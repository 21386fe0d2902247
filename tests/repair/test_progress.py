"""A repair says what it is doing: a line per model call, per candidate (and why it failed), per decision, with
the time and an estimate of the time left, also when its output goes to a pipe; bench's line counts what
report.json counts."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentflow.cli.main import run
from agentflow.errors import UserError
from agentflow.events import parse_event
from agentflow.events.kinds import (
    ModelCall,
    RepairChoice,
    RepairEnd,
    RepairMutants,
    RepairNoop,
    RepairPreflight,
    RepairStart,
    RepairStatus,
)
from agentflow.repair.run.progress import ProgressPrinter, expected_calls, verdict
from agentflow.repair.verify.workbench import Verification

from .conftest import CASSETTES, ROOT, TASKS_FILE, read_jsonl, scripted_cassette

# ----------------------------------------------------------------------------------------------- the words


def test_a_verification_says_which_tests_fail_and_of_how_many():
    status = {"FAIL_TO_PASS": {"success": [], "failure": ["tests/test_a.py::test_x"]},
              "PASS_TO_PASS": {"success": ["tests/test_a.py::test_z"] * 3, "failure": ["tests/test_b.py::test_y"]}}
    assert verdict(Verification(kind="task_tests", tests_status=status)) == "tests fail (2 of 5: test_x, test_y)"
    status["FAIL_TO_PASS"] = {"success": ["tests/test_a.py::test_x"], "failure": []}
    status["PASS_TO_PASS"]["failure"] = []
    assert verdict(Verification(kind="task_tests", tests_status=status)) == "tests pass (4 of 4)"
    # blind mode: pytest's short summary names the failures, its summary line the count
    output = "test_a:\nE   assert 1 == 2\nFAILED tests/test_a.py::test_a - assert 1 == 2\nFAILED tests/t.py::test_b"
    blind = Verification(kind="test_cmd", exit_code=1, passed=False, output=output, counts=(11, 13))
    assert verdict(blind) == "tests fail (2 of 13: test_a, test_b)"
    blind = Verification(kind="test_cmd", exit_code=0, reproduced=True, passed=False)
    assert verdict(blind) == "the issue still reproduces"
    assert verdict(Verification(kind="test_cmd", exit_code=0, reproduced=False)).startswith("not refuted")
    broken = Verification(kind="test_cmd", exit_code=2, passed=False, output="ImportError while loading conftest")
    assert verdict(broken) == "the tests did not run to the end (exit 2)"


def test_the_shipped_workflow_expects_a_call_per_attempt_and_one_per_helper_step():
    from agentflow.repair.config import load_repair_config
    from agentflow.repair.run.solve import load_repair_workflow

    cfg = load_repair_config(["search.strategy=best_of_n", "search.n=4"])
    spec, registry, _ = load_repair_workflow(cfg)
    plan = expected_calls(cfg, spec, registry)
    assert plan == {"baseline": 0, "spectrum": 0, "rank": 1, "reproduce": 2, "plan": 0, "mutants": 0, "search": 12, "choose": 0}
    cfg = load_repair_config(["search.strategy=best_of_n", "search.n=4", "critique=true", "rank=false", "tests.feedback=task"])
    spec, registry, _ = load_repair_workflow(cfg)
    plan = expected_calls(cfg, spec, registry)
    assert (plan["rank"], plan["reproduce"], plan["search"]) == (0, 0, 24)  # an edit and a review per attempt
    # the graph search: best-of-n chains of up to max_attempts edits; MCTS one edit per expansion
    cfg = load_repair_config(["search.strategy=best_of_n", "search.n=4", "search.max_attempts=2"])
    assert expected_calls(cfg, *load_repair_workflow(cfg)[:2])["search"] == 8
    cfg = load_repair_config(["search.strategy=mcts", "search.n=2", "search.max_attempts=3"])
    assert expected_calls(cfg, *load_repair_workflow(cfg)[:2])["search"] == 6
    cfg = load_repair_config(["nodes.search.strategy=rebase", "nodes.search.n=2", "search.max_attempts=3"])
    assert expected_calls(cfg, *load_repair_workflow(cfg)[:2])["search"] == 6  # a step per depth, 2 each


def test_the_start_line_says_what_the_search_runs_as_the_options_set_it():
    from agentflow.repair.config import load_repair_config
    from agentflow.repair.run.solve import load_repair_workflow
    from agentflow.repair.run.workflow_settings import search_summary

    def summary(*items: str) -> str | None:
        return search_summary(load_repair_workflow(load_repair_config(list(items)))[0])

    assert summary("search.strategy=best_of_n", "search.n=8") == "best_of_n, n=8"
    assert summary("search.strategy=mcts", "search.n=2", "search.max_attempts=3") == "mcts, n=6"  # an expansion per attempt
    assert summary("nodes.search.strategy=rebase", "nodes.search.n=3") == "rebase, n=3"
    assert summary("workflow=codemonkeys") == "best_of_n, n=3"  # its trajectories
    with pytest.raises(UserError, match="no search over chains of attempts to set"):  # --strategy reshapes those only
        summary("workflow=codemonkeys", "search.strategy=mcts")


def test_the_estimate_is_the_mean_seconds_per_call_times_the_calls_still_expected():
    lines: list[str] = []
    printer = ProgressPrinter(lines.append)

    call = {"spec": "m", "model": "m", "n": 1, "cached": False, "finish_reasons": ["stop"]}

    def at(ts: float, kind: str, node_id: str | None = None, **data: object) -> None:
        printer(parse_event({"ts": ts, "kind": kind, "node_id": node_id, **data}))

    at(100.0, "repair.start", "t-1", instance_id="t-1", model="m", workflow="repair", search="best_of_n, n=4",
       expected_calls={"rank": 1, "search": 4, "choose": 0}, step_limit=None, wall_time_s=None)
    at(101.0, "node.start", "t-1/rank", instance_id="t-1", type="swe.rank")
    at(110.0, "model.call", "t-1", **call, usage={"input_tokens": 700, "output_tokens": 2}, latency_s=8.5)
    at(110.0, "node.end", "t-1/rank", instance_id="t-1", writes=[])
    at(111.0, "node.start", "t-1/search", instance_id="t-1", type="search", strategy="best_of_n")
    # the search's branches run graph nodes of their own: not steps of the task
    at(111.5, "node.start", "t-1/edit", instance_id="t-1", type="swe.edit", search="search", branch="b0")
    at(120.0, "model.call", "t-1/b0.1", parent_id="t-1/root", **call,
       usage={"input_tokens": 900, "output_tokens": 60}, latency_s=7.0, search="search", branch="b0")
    at(125.0, "repair.candidate", "t-1/b0.1", instance_id="t-1", candidate_id="t-1/b0.1", status="ok",
       reason="tests fail (1 of 3: test_x)", passed=False, score=0.3, part_of=None)
    # past its share the search still expects a call, nothing else being left
    for k, ts in enumerate((130.0, 140.0, 150.0, 160.0), start=1):
        at(ts, "model.call", f"t-1/b{k}.1", **call, usage={"input_tokens": 1, "output_tokens": 1}, latency_s=1.0)
    at(161.0, "node.end", "t-1/search", instance_id="t-1", writes=[])
    at(162.0, "repair.choice", "t-1", instance_id="t-1", candidate_id="t-1/b1.1", chosen_by="vote", among=5,
       reason="tests pass (3 of 3)", noop=False)
    at(170.0, "repair.end", "t-1", instance_id="t-1", status="submitted", chosen="t-1/b1.1", chosen_by="vote",
       resolved=True, error=None)
    assert lines[0] == ("[00:00] repair t-1: workflow repair (search best_of_n, n=4), model m; "
                        "about 5 model calls expected")
    assert lines[1] == "[00:01] step rank (swe.rank, about 1 model call)"
    # 10 s for one call, 4 calls of the search left
    assert lines[2] == "[00:10] model call 1 (rank): 700 in + 2 out tokens, 8.5s; ETA 40s"
    assert lines[3] == "[00:11] step search (search, about 4 model calls)"
    assert lines[4] == "[00:20] model call 2 (edit b0.1): 900 in + 60 out tokens, 7.0s; ETA 30s"
    assert lines[5] == "[00:25] candidate b0.1: tests fail (1 of 3: test_x); ETA 38s"
    assert lines[9].endswith("model call 6 (edit b4.1): 1 in + 1 out tokens, 1.0s; ETA 10s")
    assert lines[10] == ("[01:02] decision: b1.1 of 5 candidates, chosen by vote: most samples agree on its patch; "
                         "its verification: tests pass (3 of 3)")
    assert lines[11] == "[01:10] done: submitted, resolved, b1.1 chosen by vote; 6 model calls, 1670 tokens, 1m10s"


def test_a_repair_stopped_by_its_preflight_prints_nothing_but_the_error():
    """The stop is one line, the error's: the printer says neither what the repair was about to do nor the
    pre-flight's finding (a task of a bench says it in its end line)."""
    start = RepairStart(node_id="t", instance_id="t", model="m", workflow="repair", expected_calls={"search": 4},
                        step_limit=None, wall_time_s=None)
    found = RepairPreflight(node_id="t", instance_id="t", command="pytest -q", exit_code=2,
                            cause="No module named 'x'", fix="...")
    lines: list[str] = []
    printer = ProgressPrinter(lines.append)
    for event in (start, found, RepairEnd(node_id="t", instance_id="t", status=RepairStatus.NO_PATCH)):
        printer(event)
    assert lines == []  # the repair raised its error: that is the line
    printer = ProgressPrinter(lines.append)
    printer(start)
    printer(found)
    printer(RepairEnd(node_id="t", instance_id="t", status=RepairStatus.ENV_ERROR,
                      error="pre-flight: No module named 'x'"))
    assert [line.split("] ", 1)[1].split(":", 1)[0] for line in lines] == ["repair t", "done"]
    assert "done: env_error (pre-flight: No module named 'x')" in lines[1]


def test_candidates_that_change_no_code_are_said_to_be_left_out():
    """The choice says which candidates it left out as changing no code, and a task where that was every one of
    them ends saying so; a submitted patch that changes no code (the tests passed at the base) is flagged."""
    lines: list[str] = []
    printer = ProgressPrinter(lines.append)
    for data in ({"left_out": 3, "among": 4}, {"left_out": 2, "among": 2}):
        printer(RepairNoop(node_id="t", instance_id="t", **data))
    printer(RepairChoice(node_id="t", instance_id="t", candidate_id="t/c1", among=2, chosen_by="vote",
                         reason="no test decides", noop=True))
    printer(RepairEnd(node_id="t", instance_id="t", status=RepairStatus.NO_PATCH, chosen=None, chosen_by="noop"))
    said = [line.split("] ", 1)[1] for line in lines]
    assert said[0].endswith("decision: left out 3 of 4 candidates: they change only docstrings, comments or "
                            "whitespace, and the tests fail at the base commit")
    assert said[1].endswith("decision: nothing submitted: every candidate changes only docstrings, comments or "
                            "whitespace, and the tests fail at the base commit")
    assert said[2].endswith("its verification: no test decides; it changes no code")
    assert said[3].startswith("done: no_patch, every candidate changes no code")


def test_the_mutants_step_says_what_it_tried_and_why_it_stopped():
    """One line for `swe.mutants`: how many of how many changes of which functions, and what ended it: a
    passing change, or a bound (named by its setting) with none passing."""
    lines: list[str] = []
    printer = ProgressPrinter(lines.append)
    common = {"node_id": "t", "instance_id": "t", "functions": ["pkg/a.py:Cache.get", "pkg/b.py:split"],
              "changes": 57}
    printer(RepairMutants(**common, tried=4, seconds=3.2, passed="t/mutant.4", stopped="passed"))
    printer(RepairMutants(**common, tried=31, seconds=120.4, passed=None, stopped="seconds"))
    printer(RepairMutants(**common, tried=57, seconds=80.0, passed=None, stopped="all"))
    said = [line.split("] ", 1)[1] for line in lines]
    assert said[0] == ("mutants: 4 of 57 single-site changes of Cache.get, split verified in 3s; mutant.4 passes "
                       "(the search is not needed)")
    assert said[1].endswith("31 of 57 single-site changes of Cache.get, split verified in 120s; none passes "
                            "(stopped at mutants_seconds)")
    assert said[2].endswith("verified in 80s; none passes")


def test_a_line_that_cannot_be_written_does_not_stop_the_repair():
    def broken(line: str) -> None:
        raise BrokenPipeError(line)

    printer = ProgressPrinter(broken)
    printer(RepairStart(node_id="t", instance_id="t", model="m", workflow="repair", expected_calls={},
                        step_limit=None, wall_time_s=None))
    printer(ModelCall(node_id="t", spec="m", model="m", usage={}, latency_s=0.1, n=1, cached=False,
                      finish_reasons=["stop"]))


# ----------------------------------------------------------------------------------------------- a real repair


@pytest.mark.docker
def test_a_piped_repair_prints_each_model_call_candidate_and_decision_as_it_happens(docker_image: str,
                                                                                      tmp_path: Path):
    """inikit-1, blind, best-of-4 with a replayed model, stderr a pipe: the first model call's line arrives while
    the repair is still running (flushed, not held until the end), and the lines match the run's own files."""
    out = tmp_path / "run"
    argv = [str(Path(sys.executable).parent / "agentflow"), "repair", "--tasks", str(TASKS_FILE),
            "-i", "inikit__inikit-1", "--model", f"replay:{CASSETTES / 'blind_inikit-1.json'}",
            "-c", "search.concurrency=1", "-c", "edit.format=search_replace", "--strategy", "best_of_n", "-n", "4",
            "-c", "search.max_attempts=1", "-c", "keep_check=false", "-c", "mutants=false", "--sandbox", "docker",
            "-c", f"sandbox.image={docker_image}", "-o", str(out)]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    lines: list[str] = []
    for line in proc.stderr:
        lines.append(line.rstrip("\n"))
        if " model call 1 " in line:
            # the search, the choice and the grading are still to come: the line was not held until the end
            assert not (out / "instances" / "inikit__inikit-1" / "outcome.json").exists()
            break
    lines += proc.stderr.read().splitlines()
    assert proc.wait(timeout=600) == 0, "\n".join(lines)

    assert any(f"] repair inikit__inikit-1: workflow repair (search best_of_n, n=4), model replay:"
               f"{CASSETTES / 'blind_inikit-1.json'}; about " in line for line in lines), lines
    events = read_jsonl(out / "events.jsonl")
    calls = [line for line in lines if re.match(r"\[\d\d:\d\d\] model call \d+ \(", line)]
    assert len(calls) == sum(1 for e in events if e["kind"] == "model.call") == 6
    assert " (rank): 700 in + 2 out tokens, " in calls[0]
    assert [re.search(r"\((edit b\d\.\d)\)", c).group(1) for c in calls[2:]] == [f"edit b{k}.1" for k in range(4)]
    assert all(re.search(r"; ETA \d[\dhms]*$", c) for c in calls)  # every call gives an estimate
    cands = [line.split("] ", 1)[1] for line in lines if "] candidate " in line]
    assert [c.split(":", 1)[0] for c in cands] == [f"candidate b{k}.1" for k in range(4)]
    # b1.1 passes the tests but the reproduction still fails; the others are not refuted; each ran only the
    # tests that reach the function it changed
    assert re.match(r"candidate b1.1: the issue still reproduces \[ran the \d+ tests that reach the change\]; ETA", cands[1])
    assert all("not refuted: the tests pass and the reproduction no longer fails" in cands[k] for k in (0, 2, 3))
    outcome = json.loads((out / "instances" / "inikit__inikit-1" / "outcome.json").read_text())
    decision = next(line for line in lines if "] decision: " in line)
    assert f"decision: {outcome['chosen'].split('/')[1]} of 4 candidates, chosen by {outcome['chosen_by']}: " in decision
    assert lines[-2].split("] ", 1)[1].startswith("done: submitted, resolved, b0.1 chosen by vote; 6 model calls")
    assert [line.split("] ", 1)[1] for line in lines if "] step search " in line] == [
        "step search (search, about 4 model calls)"]  # the search's branches' nodes are not steps of their own


@pytest.mark.docker
def test_quiet_prints_no_progress(docker_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    cassette = scripted_cassette(tmp_path / "c.json", ["no edit here"])
    argv = ["repair", "--tasks", str(TASKS_FILE), "-i", "inikit__inikit-1", "--model", f"replay:{cassette}",
            "-c", "rank=false", "-c", "spectrum=false", "-c", "tests.feedback=task", "-c", "mutants=false", "-c", "search.max_attempts=1",
            "-c", "noop_retries=0", "-c", "edit.format=search_replace", "--sandbox", "docker",
            "-c", f"sandbox.image={docker_image}", "--quiet"]
    assert run([*argv, "-o", str(tmp_path / "quiet")]) == 1
    err = capsys.readouterr().err
    assert "model call" not in err and "candidate" not in err and "see it: agentflow view" in err
    assert run([*argv[:-1], "-o", str(tmp_path / "loud")]) == 1
    err = capsys.readouterr().err
    assert "] model call 1 (edit b0.1)" in err and "] candidate b0.1: the answer could not be read" in err


# ----------------------------------------------------------------------------------------------- bench


WRONG_FIX = ("cachette/stats.py\n<<<<<<< SEARCH\n        return self.hits / self.lookups\n=======\n"
             "        if not self.lookups:\n            return 1.0\n        return self.hits / self.lookups\n"
             ">>>>>>> REPLACE\nEND_EDITS")
"""cachette-2: an empty cache's hit rate is 1.0, not 0.0 (the task's tests reject it)."""


@pytest.mark.docker
def test_bench_counts_what_the_report_counts_and_estimates_from_finished_tasks(docker_image: str, tmp_path: Path,
                                                                               capsys: pytest.CaptureFixture[str]):
    """Three tasks: one resolved, one submitted and not resolved (counted submitted, not failed), one without a
    patch (failed). Each progress line counts what report.json counts at that moment; from the first finished
    task on it gives an estimate."""
    cassettes = tmp_path / "cassettes"
    cassettes.mkdir()
    shutil.copy(CASSETTES / "bench" / "inikit__inikit-1.json", cassettes / "inikit__inikit-1.json")
    scripted_cassette(cassettes / "cachette__cachette-2.json", ["1", WRONG_FIX])
    scripted_cassette(cassettes / "tabkit__tabkit-2.json", ["1", "I would need to see more of the code."])
    out = tmp_path / "run"
    argv = ["bench", str(TASKS_FILE), "--model", f"replay:{cassettes / '{instance_id}.json'}", "--sandbox", "docker",
            "-c", f"sandbox.image={docker_image}", "-o", str(out), "-c", "tests.feedback=task", "-c", "mutants=false", "-c", "search.max_attempts=1",
            "-c", "noop_retries=0", "-c", "spectrum=false", "-c", "edit.format=search_replace",
            "-i", "inikit__inikit-1", "-i", "cachette__cachette-2", "-i", "tabkit__tabkit-2"]
    assert run(argv) == 0
    captured = capsys.readouterr()
    progress = [line for line in captured.err.splitlines() if re.match(r"\[\d\d:\d\d\] \d/3 done: ", line)]
    assert len(progress) == 4  # before the first task, then after each
    assert "] run: 3 of 3 tasks to repair (search best_of_n, n=" in captured.err  # what --strategy set, or the YAML
    assert "ETA ?" in progress[0] and all(re.search(r"; ETA \d[\dhms]*;", line) for line in progress[1:])
    report = json.loads((out / "report.json").read_text())
    last = re.search(r"3/3 done: submitted (\d+) \(resolved (\d+)\), failed (\d+)", progress[-1])
    assert last is not None
    assert tuple(int(g) for g in last.groups()) == (
        report["completed_instances"] + report["error_instances"], report["resolved_instances"],
        report["empty_patch_instances"]) == (2, 1, 1)
    assert report["instances"]["cachette__cachette-2"]["status"] == "submitted"
    assert report["instances"]["tabkit__tabkit-2"]["status"] == "no_patch"
    # the last line of the run says the same
    assert "3/3 done: submitted 2 (resolved 1), failed 1; statuses: no_patch 1, submitted 2" in captured.out
    # the wrong fix's candidate says which test failed; the unreadable answer says so
    assert re.search(r"cachette__cachette-2: candidate b0.1: tests fail \(1 of \d+: test_\w+\)", captured.err)
    assert "tabkit__tabkit-2: candidate b0.1: the answer could not be read" in captured.err


def test_a_graph_search_node_expects_its_attempts_times_the_calls_of_one():
    """The published workflows' graph search nodes: agentless's 4 one-shot branches; swe_search's 6 expansions of
    an edit and its value; repair's chains with `--strategy`, and a review per attempt with critique on."""
    from agentflow.repair.config import load_repair_config
    from agentflow.repair.run.solve import load_repair_workflow

    def plan(*args: str) -> dict[str, int]:
        cfg = load_repair_config(list(args))
        spec, registry, _ = load_repair_workflow(cfg)
        return expected_calls(cfg, spec, registry)

    assert plan("workflow=agentless")["search"] == 4
    assert plan("workflow=swe_search")["search"] == 12
    assert plan("workflow=swe_search", "nodes.search.n=3")["search"] == 6
    assert plan("search.strategy=best_of_n", "search.n=4")["search"] == 12
    assert plan("search.strategy=best_of_n", "search.n=4", "critique=true")["search"] == 24
