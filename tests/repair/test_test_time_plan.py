"""The test-time share is of the task's *expected* wall time, re-planned at every step (`testshare.WallPlan`): the
seconds so far plus the model calls left times the seconds per call (the task's own calls' mean; before its
first, the run's finished tasks', else `tests.model_call_s`), at most the wall limit. A traced run or a
shortened candidate run slower than planned stops at its time instead of timing out. Real test runs of a
generated repository with a slow suite in the local sandbox, scripted (replayed) model answers; the planning
arithmetic on real budgets."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import pytest

from agentflow.budget import Budget, CallTime
from agentflow.models.base import ChatRequest, ChatResponse, Message, ModelWrapper
from agentflow.models.instrumented import InstrumentedModel
from agentflow.models.replay import ReplayModel
from agentflow.repair.verify.testshare import TestTimeShare, WallPlan, describe, expected_wall_s

from .conftest import read_jsonl, scripted_cassette
from .test_preflight import FIX
from .test_test_time_budget import NAMED_ISSUE, events_of, make_slow_repo, repair

# ------------------------------------------------------------------------------------- the planning arithmetic


def test_the_expected_wall_time_is_the_time_so_far_and_the_calls_left_at_their_pace_capped_by_the_limit() -> None:
    assert expected_wall_s(100.0, 10, 20.0, None) == 300.0
    assert expected_wall_s(100.0, 10, 20.0, 1800.0) == 300.0
    assert expected_wall_s(100.0, 100, 20.0, 1800.0) == 1800.0  # at most the wall limit
    assert expected_wall_s(100.0, 0, 20.0, 1800.0) == 100.0  # no call left: the task ends about now
    assert expected_wall_s(100.0, None, 20.0, 1800.0) == 1800.0  # no call limit: the wall limit, as before
    assert expected_wall_s(100.0, None, 20.0, None) is None  # neither: nothing to plan against


def charge_calls(budget: Budget, *seconds: float | None) -> None:
    """Model calls admitted and charged as `InstrumentedModel` charges them (None: a served answer)."""
    for took in seconds:
        with budget.model_call() as hold:
            hold.charge_model(tokens=10, seconds=took)


def test_the_budget_times_the_calls_that_reached_a_model_here_and_in_its_parent() -> None:
    parent = Budget()
    budget = parent.child(model_calls=10)
    charge_calls(budget, 4.0, 6.0, None)
    assert budget.used.model_calls == 3  # a served answer is a call
    assert budget.timed() == CallTime(calls=2, seconds=10.0) and budget.timed().mean_s() == 5.0
    assert parent.timed() == CallTime(calls=2, seconds=10.0)
    assert Budget().timed().mean_s() is None


def test_the_pace_is_the_tasks_own_then_the_earlier_tasks_then_the_setting() -> None:
    earlier = CallTime()
    budget = Budget(model_calls=10)
    plan = WallPlan(budget, None, default_call_s=30.0, earlier=earlier)
    assert plan.call_s() == 30.0
    earlier.add(CallTime(calls=4, seconds=20.0))  # the run adds each finished task's calls to the same object
    assert plan.call_s() == 5.0
    charge_calls(budget, 2.0, None)
    assert plan.call_s() == 2.0  # its own, the served answer not timed
    expected = plan.expected_s()
    assert expected is not None and 16.0 <= expected < 16.5  # 8 calls left x 2 s, and the fraction of a second so far


def test_the_share_is_re_planned_at_every_step_as_the_calls_are_made() -> None:
    """A suite of 100 s (1,000 tests); 10 calls of 30 s expected: 300 s, a 90 s share. The traced run (200 s
    expected) is shortened to what fits in it; once 9 calls of 2 s each are made, a whole-suite check expected
    at 100 s is shortened too, to the few seconds left; without any limit nothing is planned or shortened."""
    budget = Budget(model_calls=10)
    share = TestTimeShare(share=0.3, plan=WallPlan(budget, 1800.0, default_call_s=30.0))
    share.measured(100.0, 1000)
    limit = share.limit()
    assert limit is not None and 90.0 <= limit < 90.5
    traced = share.allow(300.0, 5.0, slowdown=2.0)
    assert traced.timeout_s == pytest.approx(limit, abs=0.5) and traced.tests is not None
    assert 280 <= traced.tests <= 295  # (0.8 x 90 s - 20 s of start) at 0.18 s a traced test
    share.spend(72.0)
    charge_calls(budget, *([2.0] * 9))
    planned = share.limit()
    assert planned is not None and planned < 1.0  # 0.3 x (1 call x 2 s + the fraction of a second so far)
    final = share.allow(500.0, 5.0)
    assert final.timeout_s == 5.0 and final.tests == 0  # the floor; no test fits: the failing ones only

    free = TestTimeShare(share=0.3, plan=WallPlan(Budget(), None, default_call_s=30.0))
    free.measured(100.0, 1000)
    assert free.limit() is None and free.left_s() is None
    assert free.allow(300.0, 5.0, slowdown=2.0).tests is None and free.allow(300.0, 5.0).timeout_s == 300.0


def test_a_report_says_what_the_share_was_planned_against() -> None:
    budget = Budget(model_calls=4)
    share = TestTimeShare(share=0.3, plan=WallPlan(budget, None, default_call_s=100.0))
    share.measured(100.0, 1000)
    share.shortened("localization", 400, 1000, share.allow(300.0, 5.0, slowdown=2.0))
    found = share.reports[0]
    assert found["expected_wall_s"] is not None and 400.0 <= found["expected_wall_s"] < 401.0
    assert found["share_s"] is not None and 120.0 <= found["share_s"] < 121.0
    assert describe(found).startswith("tests: localization ran 400 of 1,000 (time share 30% of the task's expected 400s,")


class TimedAnswers(ModelWrapper):
    """A cassette's answers, each taking `seconds` and given as a model's own (not a served answer)."""

    def __init__(self, inner: ReplayModel, seconds: float) -> None:
        super().__init__(inner)
        self.seconds = seconds

    async def chat(self, request: ChatRequest) -> ChatResponse:
        started = time.monotonic()
        await asyncio.sleep(self.seconds)
        response = await self.inner.chat(request)
        response.cached, response.latency_s = False, time.monotonic() - started
        return response


def test_a_models_own_answer_is_timed_and_a_served_one_is_not(tmp_path: Path) -> None:
    cassette = scripted_cassette(tmp_path / "a.json", ["one", "two"])
    budget = Budget()
    request = ChatRequest(messages=[Message(role="user", content="hi")])

    async def go() -> None:
        await InstrumentedModel(ReplayModel(cassette), budget=budget).chat(request)  # a cassette's: served
        await InstrumentedModel(TimedAnswers(ReplayModel(cassette), 0.2), budget=budget).chat(request)

    asyncio.run(go())
    assert budget.used.model_calls == 2
    timed = budget.timed()
    assert timed.calls == 1 and 0.2 <= timed.seconds < 2.0


# ------------------------------------------------------------------------------------- real runs


def time_events(out: Path) -> list[dict]:
    return events_of(out, "repair.test_time")


def test_a_short_expected_wall_time_shortens_the_traced_run_and_the_finalists_check(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """4 model calls of half a second expected (the cassette's answers are not timed: the setting is the pace):
    the task is expected to take seconds, and its share is 30% of that. The suite (about 8 s) does not fit: the
    pre-flight, the traced run and the finalist's whole-suite check each run a shortened selection (the failing
    test first) and say so, nothing times out, and the fix is still found."""
    repo = make_slow_repo(tmp_path / "repo")
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 4)
    out = tmp_path / "run"
    assert repair(out, "local", None, repo, cassette, "limits.step_limit=4", "tests.model_call_s=0.5",
                  issue=NAMED_ISSUE) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["report"]["resolved"] is True
    found = time_events(out)
    assert not [e for e in found if e["action"] == "timed_out"], found
    by_step = {e["step"]: e for e in found if e["action"] == "shortened"}
    assert {"localization", "confirmation"} <= set(by_step), found
    for step in ("localization", "confirmation"):
        event = by_step[step]
        assert event["share"] == 0.3 and event["expected_wall_s"] < 60.0, event  # no wall limit: planned
        assert event["share_s"] == pytest.approx(0.3 * event["expected_wall_s"], abs=0.1), event
        assert event["tests"] < event["suite_tests"] == 50, event
    spectrum = events_of(out, "repair.spectrum")[0]
    assert spectrum["tests"]["failed"] == 1 and sum(spectrum["tests"].values()) < 50, spectrum
    confirm = events_of(out, "repair.confirm")[0]
    assert confirm["whole"] is not None and confirm["whole"][1] < 50, confirm
    assert "tests: localization ran" in captured.err and "time share 30% of the task's expected" in captured.err
    assert "tests: confirmation ran" in captured.err


def test_a_long_expected_wall_time_runs_the_traced_run_and_the_finalists_check_whole(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same task with 4 calls of 300 s expected: a share of 6 minutes; every run is whole, none reported."""
    repo = make_slow_repo(tmp_path / "repo")
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 4)
    out = tmp_path / "run"
    assert repair(out, "local", None, repo, cassette, "limits.step_limit=4", "tests.model_call_s=300",
                  issue=NAMED_ISSUE) == 0
    assert json.loads(capsys.readouterr().out)["report"]["resolved"] is True
    assert time_events(out) == []
    assert events_of(out, "repair.preflight")[0]["ran_tests"] is None
    spectrum = events_of(out, "repair.spectrum")[0]
    assert spectrum["tests"] == {"passed": 49, "failed": 1}, spectrum
    assert events_of(out, "repair.confirm")[0]["whole"] == [50, 50]


def test_a_batchs_next_task_plans_at_the_pace_of_the_tasks_before_it(tmp_path: Path) -> None:
    """Two tasks, one at a time; the setting expects calls of 1,000 s, the model answers in a fifth of a second.
    The first task plans its pre-flight and traced run at the setting (a long task: both whole); the second,
    before its own first call, at the first task's pace: a task of seconds, its pre-flight and traced run
    shortened and reported. The outcome records each task's timed calls."""
    from agentflow.repair.config import load_repair_config
    from agentflow.repair.run.runs import run_batch
    from agentflow.swe.tasks import load_tasks

    for name in ("first", "second"):
        make_slow_repo(tmp_path / name)
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps({"instance_id": name, "repo": name, "base_commit": "HEAD",
                                              "problem_statement": NAMED_ISSUE, "FAIL_TO_PASS": [],
                                              "PASS_TO_PASS": []}) + "\n" for name in ("first", "second")))
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 4)
    cfg = load_repair_config([f"model=replay:{cassette}", "backend=local", "edit.format=search_replace",
                              "search.concurrency=1", "rank=false", "tests.feedback=repo", "search.strategy=best_of_n",
                              "search.n=1", "limits.step_limit=4", "tests.model_call_s=1000", "workers=1",
                              "mutants=false"])
    out = tmp_path / "run"
    asyncio.run(run_batch(load_tasks(tasks_file), cfg, out,
                          model_loader=lambda spec: TimedAnswers(ReplayModel(spec.removeprefix("replay:")), 0.2)))
    events = read_jsonl(out / "events.jsonl")

    def reported(iid: str) -> dict[str, dict]:
        return {e["data"]["step"]: e["data"] for e in events
                if e.get("kind") == "repair.test_time" and e.get("node_id") == iid}

    first, second = reported("first"), reported("second")
    assert "preflight" not in first and "localization" not in first, first
    assert {"preflight", "localization"} <= set(second), second
    assert second["localization"]["expected_wall_s"] < 60.0, second
    outcomes = {iid: json.loads((out / "instances" / iid / "outcome.json").read_text()) for iid in ("first", "second")}
    for outcome in outcomes.values():
        calls = outcome["call_time"]["calls"]
        assert calls >= 1 and outcome["call_time"]["seconds"] >= 0.2 * calls, outcome["call_time"]


BUSY_TESTS = 60


def make_busy_repo(root: Path) -> Path:
    """The slow repository's package and failing test, and 60 tests that each call a repository function 500,000
    times: quick untraced, many times slower under the call tracer than the planned slowdown."""
    make_slow_repo(root)
    subprocess.run(["git", "rm", "-rq", "tests/other", "tests/test_core_slow.py"], cwd=root, check=True)
    body = "".join(f"\n\ndef test_{i}():\n    for _ in range(500_000):\n        double(2)\n" for i in range(BUSY_TESTS))
    (root / "tests" / "test_busy.py").write_text(f"from pager.extra import double\n{body}")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false",
                    "commit", "-qm", "busy"], cwd=root, check=True)
    return root


def test_a_traced_run_slower_than_planned_stops_at_its_time_with_the_spectrum_of_what_ran(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The traced run is planned at twice the plain run; these tests are many times slower traced. No test starts
    after 80% of the run's 8 s: it ends on the tests that ran (the failing one first), says so, does not time
    out, and their spectrum still puts the buggy function first."""
    repo = make_busy_repo(tmp_path / "repo")
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 4)
    out = tmp_path / "run"
    assert repair(out, "local", None, repo, cassette, "tests.timeout_s=8", issue=NAMED_ISSUE) == 0
    captured = capsys.readouterr()
    found = time_events(out)
    assert not [e for e in found if e["action"] == "timed_out"], found
    localization = [e for e in found if e["step"] == "localization"]
    assert localization and localization[-1]["action"] == "shortened", found
    total = BUSY_TESTS + 2
    assert localization[-1]["tests"] < total and localization[-1]["suite_tests"] == total, localization
    spectrum = events_of(out, "repair.spectrum")[0]
    assert spectrum["tests"]["failed"] == 1 and sum(spectrum["tests"].values()) < total, spectrum
    assert not spectrum["problems"], spectrum
    assert spectrum["suspects"][0] == "pager/core.py:paginate", spectrum
    assert "tests: localization ran" in captured.err


SLOW_FIX = FIX.replace("=======\n", "=======\n    __import__('time').sleep(0.3)\n")


def test_a_shortened_check_of_a_candidate_slower_than_the_base_stops_at_its_time(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A candidate's run may take the base run's time (`tests.timeout_ratio=1`): the finalist's whole-suite check
    would not fit, so it is shortened to the tests planned to fit 80% of it at the base run's pace. The fix
    makes the ten tests reaching it slower: the check starts no test after that time and ends on those that ran
    (they pass), says so, does not time out, and the fix is chosen and resolves the issue."""
    repo = make_slow_repo(tmp_path / "repo")
    cassette = scripted_cassette(tmp_path / "fix.json", [SLOW_FIX] * 4)
    out = tmp_path / "run"
    assert repair(out, "local", None, repo, cassette, "tests.timeout_ratio=1", "tests.timeout_floor_s=1",
                  "mutants=false", issue=NAMED_ISSUE) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["report"]["resolved"] is True
    found = time_events(out)
    assert not [e for e in found if e["action"] == "timed_out"], found
    confirmation = [e for e in found if e["step"] == "confirmation"]
    assert [e["action"] for e in confirmation] == ["shortened", "shortened"], found
    planned, stopped = confirmation
    assert stopped["tests"] < planned["tests"] < 50, confirmation
    confirm = events_of(out, "repair.confirm")[0]
    assert confirm["held"] is True and confirm["whole"] == [stopped["tests"], stopped["tests"]], confirm
