"""Every test run of a repair goes through one budget (`agentflow.repair.verify.testshare`): from the pre-flight's
run (T seconds for N tests) each step gets an allowance, and a step whose full run would not fit in it runs a
shortened selection (the failing tests first, then the test files nearest the suspects) instead of timing out;
a run that still times out is a `repair.test_time` event and a progress line. Real test runs of a generated
repository with a slow suite (many tests with small sleeps), in the local sandbox and in Docker; scripted
(replayed) model answers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agentflow.cli.main import run

from .conftest import read_jsonl, scripted_cassette
from .test_preflight import FIX, PAGER, TESTS

ISSUE = """paginate(items, 1, 3) returns the second page instead of the first: page numbers are 1-based.

```python
from pager.core import paginate
print(paginate(list(range(10)), 1, 3))
```
"""
SLEEP_S = 0.15
NEAR_TESTS = 8
FAR_FILES, FAR_TESTS = 5, 8


def slow_tests(imports: str, call: str, n: int) -> str:
    body = "".join(f"\n\ndef test_{i}():\n    time.sleep({SLEEP_S})\n    {call}\n" for i in range(n))
    return f"import time\n\n{imports}\n{body}"


def make_slow_repo(root: Path) -> Path:
    """Package `pager` (an off-by-one in `pager/core.py`, a helper module `pager/extra.py`); tests/test_pager.py
    (one failing test), tests/test_core_slow.py (slow tests of `pager.core`), and five folders' worth of slow
    tests of `pager.extra` under tests/other/: 50 tests, about 7 s of sleeps."""
    pkg = root / "pager"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pager.core import paginate\n\n__all__ = ['paginate']\n")
    (pkg / "core.py").write_text(PAGER)
    (pkg / "extra.py").write_text("def double(x):\n    return 2 * x\n")
    (root / "tests" / "other").mkdir(parents=True)
    (root / "tests" / "test_pager.py").write_text(TESTS)
    (root / "tests" / "test_core_slow.py").write_text(
        slow_tests("from pager.core import paginate", "assert paginate([], 2, 3) == []", NEAR_TESTS))
    for k in range(FAR_FILES):
        (root / "tests" / "other" / f"test_extra_{k}.py").write_text(
            slow_tests("from pager.extra import double", "assert double(2) == 4", FAR_TESTS))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=root, check=True)
    return root


def repair(out: Path, backend: str, image: str | None, repo: Path, cassette: Path, *settings: str,
           issue: str = ISSUE) -> int:
    args = ["repair", str(repo), "--issue", issue, "--model", f"replay:{cassette}", "--sandbox", backend,
            "-c", "edit.format=search_replace", "-c", "search.concurrency=1", "-c", "rank=false", "-o", str(out),
            "--strategy", "best_of_n", "-n", "1", "--json"]
    if image is not None:
        args += ["-c", f"sandbox.image={image}"]
    for setting in settings:
        args += ["-c", setting]
    return run(args)


def events_of(out: Path, kind: str) -> list[dict]:
    return [e["data"] for e in read_jsonl(out / "events.jsonl") if e.get("kind") == kind]


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    if request.param == "docker":
        return "docker", request.getfixturevalue("docker_image")
    return "local", None


def test_a_traced_run_that_would_not_fit_its_timeout_runs_the_tests_nearest_the_suspects(
        backend: tuple[str, str | None], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No wall limit, so no share: the step's own timeout is the allowance. The suite (about 8 s) fits the
    pre-flight's 14 s; traced (twice as slow) it would not, so the localization runs the failing tests and the
    tests of the module the issue's example ran (pager/core.py), not the 40 far tests, says so, and finishes
    within its allowance; the fix is still found."""
    repo = make_slow_repo(tmp_path / "repo")
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 4)
    out = tmp_path / "run"
    assert repair(out, *backend, repo, cassette, "tests.timeout_s=14") == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["report"]["resolved"] is True
    preflight = events_of(out, "repair.preflight")[0]
    assert preflight["counts"] == {"failed": 1, "passed": 49}, preflight
    time_events = events_of(out, "repair.test_time")
    localization = [e for e in time_events if e["step"] == "localization"]
    assert [e["action"] for e in localization] == ["shortened"], time_events
    assert localization[0]["suite_tests"] == 50 and localization[0]["tests"] == 2 + NEAR_TESTS, localization
    assert localization[0]["share_s"] is None and localization[0]["timeout_s"] == 14.0
    assert not [e for e in time_events if e["action"] == "timed_out"], time_events
    spectrum = events_of(out, "repair.spectrum")[0]
    assert spectrum["tests"] == {"passed": 1 + NEAR_TESTS, "failed": 1}, spectrum  # the failing test ran
    assert spectrum["suspects"][0] == "pager/core.py:paginate", spectrum
    assert "tests: localization ran 10 of 50 (time limit 14s" in captured.err
    ts = {e["kind"]: e["ts"] for e in read_jsonl(out / "events.jsonl")
          if e["kind"] in ("node.start", "node.end") and e["node_id"].endswith("/spectrum")}
    assert ts["node.end"] - ts["node.start"] < 14.0, ts  # examples and the traced run, within the allowance


def test_a_candidate_run_that_times_out_says_so(backend: tuple[str, str | None], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A candidate that hangs: its run is cut at its timeout (a multiple of the base run, here the 1 s floor,
    the suite of one test file taking well under that), and the event and the progress line say so."""
    repo = make_slow_repo(tmp_path / "repo")
    for path in (repo / "tests").glob("test_core_slow.py"):
        path.unlink()
    subprocess.run(["rm", "-r", str(repo / "tests" / "other")], check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qam", "fast"],
                   cwd=repo, check=True)
    hang = FIX.replace("start = (page - 1) * per_page", "while True:\n        pass")
    cassette = scripted_cassette(tmp_path / "hang.json", [hang] * 4)
    out = tmp_path / "run"
    repair(out, *backend, repo, cassette, "tests.timeout_ratio=1", "tests.timeout_floor_s=1", "spectrum=false",
           "mutants=false")
    err = capsys.readouterr().err
    timed_out = [e for e in events_of(out, "repair.test_time") if e["action"] == "timed_out"]
    assert timed_out and timed_out[0]["step"] in ("verification", "confirmation"), timed_out
    assert "tests: verification timed out after" in err or "tests: confirmation timed out after" in err


def test_an_allowance_holds_the_run_or_says_how_many_tests_fit() -> None:
    """At the base run's pace (100 s for 1,000 tests, a tenth of it start-up), a 300 s step runs the suite;
    traced (twice as slow) in a 120 s step it runs about as many tests as fit in 80% of it."""
    from agentflow.repair.verify.testshare import TestTimeShare

    budget = TestTimeShare()
    budget.measured(100.0, 1000)
    assert budget.allow(300.0, 5.0).tests is None
    shortened = budget.allow(120.0, 5.0, slowdown=2.0)
    assert shortened.timeout_s == 120.0 and shortened.expected_s == 200.0
    assert shortened.tests is not None and 400 <= shortened.tests <= 450
    assert budget.expected(shortened.tests, slowdown=2.0) <= 0.8 * 120.0 + 1e-6  # type: ignore[operator]
    shared = TestTimeShare(limit_s=60.0, share=0.3)
    shared.measured(100.0, 1000)
    shared.spend(50.0)  # 10 s left of the share: the step's 300 s are cut to it
    assert shared.allow(300.0, 5.0).timeout_s == 10.0


def test_the_localization_selection_keeps_the_failing_tests_and_the_nearest_files_first() -> None:
    from agentflow.repair.verify.testshare import localization_selection

    sources = {
        "pkg/__init__.py": "",
        "pkg/core.py": "def f():\n    return 1\n",
        "pkg/extra.py": "def g():\n    return 2\n",
        "tests/test_core.py": "from pkg.core import f\n\ndef test_a():\n    pass\n\ndef test_b():\n    pass\n",
        "tests/test_core_more.py": "from pkg.core import f\n" + "".join(f"\ndef test_{i}():\n    pass\n" for i in range(5)),
        "tests/far/test_extra.py": "from pkg.extra import g\n" + "".join(f"\ndef test_{i}():\n    pass\n" for i in range(9)),
    }
    picked, count = localization_selection(["tests/test_core.py::test_a"], [], sources, limit=7)
    assert picked == ["tests/test_core.py", "tests/test_core_more.py"] and count == 7
    picked, count = localization_selection(["tests/test_core.py::test_a"], [], sources, limit=3)
    assert picked == ["tests/test_core.py"] and count == 2  # the next file (5 tests) does not fit
    picked, count = localization_selection(["tests/test_core.py::test_a"], [], sources, limit=1)
    assert picked == ["tests/test_core.py::test_a"] and count == 1  # the failing test, whatever the limit
    picked, _ = localization_selection([], ["pkg/extra.py"], sources, limit=100)
    assert picked == ["tests/far/test_extra.py"]  # a suspect the examples ran: the tests importing it


NAMED_ISSUE = ISSUE + "\nCI: tests/test_pager.py::test_first_page fails.\n"


def test_a_preflight_whose_suite_would_not_fit_runs_the_issues_tests_first_and_stops_in_time(
        backend: tuple[str, str | None], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The suite (about 8 s of sleeps) does not fit the pre-flight's 5 s: it starts with the test the issue
    names and the slow tests of the module the issue imports (pager.core), starts no test after 4 s, and ends
    on what ran, within its time: its line and event say how many of the 50 ran; the failing test is among
    them; nothing timed out; the repair goes on to the fix."""
    repo = make_slow_repo(tmp_path / "repo")
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 4)
    out = tmp_path / "run"
    assert repair(out, *backend, repo, cassette, "tests.timeout_s=5", issue=NAMED_ISSUE) == 0
    captured = capsys.readouterr()
    preflight = events_of(out, "repair.preflight")[0]
    assert preflight["cause"] is None and preflight["timed_out"] is False, preflight
    assert preflight["suite_tests"] == 50 and 1 <= preflight["ran_tests"] < 50, preflight
    assert preflight["first"] == ["tests/test_pager.py", "tests/test_core_slow.py"], preflight
    assert preflight["counts"]["failed"] == 1, preflight  # the issue's test ran first
    assert preflight["stop_after_s"] == 4.0 and preflight["seconds"] < 5.0, preflight
    ran = preflight["ran_tests"]
    assert f"ran {ran} of 50 tests (no test started after 4s" in captured.err
    assert "first the 2 test files nearest the issue (tests/test_pager.py, tests/test_core_slow.py)" in captured.err
    time_events = events_of(out, "repair.test_time")
    assert [e for e in time_events if e["step"] == "preflight"] == [
        {**time_events[0], "step": "preflight", "action": "shortened", "tests": ran, "suite_tests": 50}], time_events
    assert f"tests: preflight ran {ran} of 50 (time limit 5s, the whole run expected" in captured.err
    assert not [e for e in time_events if e["action"] == "timed_out"], time_events
    shown = json.loads(captured.out)
    assert shown["preflight"]["ran_tests"] == ran  # the outcome records it too
    assert "start = (page - 1) * per_page" in shown["model_patch"]


HANGS = "import time\n\n\ndef test_hangs():\n    time.sleep(30)\n"


def test_a_preflight_that_still_times_out_says_so_in_the_events_the_outcome_and_the_progress(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One test runs on past the pre-flight's timeout (a test started before the stop time does not end): the
    run is cut at 3 s, and the task's events, its outcome and the progress lines say so; the batch's other
    task is repaired."""
    from .test_preflight import make_repo

    make_repo(tmp_path / "hangs", extra_test=HANGS)
    make_repo(tmp_path / "good")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"instance_id": name, "repo": name, "base_commit": "HEAD",
                                         "problem_statement": ISSUE, "FAIL_TO_PASS": [], "PASS_TO_PASS": []}) + "\n"
                             for name in ("hangs", "good")))
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 8)
    out = tmp_path / "run"
    assert run(["bench", str(tasks), "--model", f"replay:{cassette}", "--sandbox", "local", "-c",
                "edit.format=search_replace", "-c", "search.concurrency=1", "-c", "rank=false", "-c",
                "tests.feedback=repo", "-c", "tests.timeout_s=3", "--workers", "1", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    events = [e for e in read_jsonl(out / "events.jsonl") if e.get("node_id") == "hangs"]
    preflight = next(e["data"] for e in events if e["kind"] == "repair.preflight")
    assert preflight["timed_out"] is True and preflight["cause"] == (
        "the tests did not finish within 3s (no test was to start after 2.4s: the one running then did not end)")
    timed_out = [e["data"] for e in events if e["kind"] == "repair.test_time"]
    assert [(e["step"], e["action"], e["timeout_s"]) for e in timed_out] == [("preflight", "timed_out", 3.0)]
    outcome = json.loads((out / "instances" / "hangs" / "outcome.json").read_text())
    assert outcome["status"] == "env_error" and "did not finish within 3s" in outcome["error"]
    assert outcome["preflight"]["timed_out"] is True
    assert "tests: preflight timed out after 3.0s" in err
    report = json.loads((out / "report.json").read_text())
    assert report["resolved_ids"] == ["good"]


def test_the_preflight_order_starts_with_the_named_tests_and_those_of_the_named_modules() -> None:
    """The localization's selection with no limit: the named test's file, the files importing a module the
    issue names (or that file imports), those beside the named test; a top-level name alone says nothing."""
    from agentflow.repair.verify.testshare import preflight_order

    sources = {
        "pkg/__init__.py": "",
        "pkg/core.py": "def f():\n    return 1\n",
        "pkg/extra.py": "def g():\n    return 2\n",
        "tests/test_a.py": "import pkg\n\ndef test_a():\n    pass\n",
        "tests/test_uses_core.py": "from pkg.core import f\n\ndef test_b():\n    pass\n",
        "tests/far/test_extra.py": "from pkg.extra import g\n\ndef test_c():\n    pass\n",
        "tests/far/test_other.py": "import pkg\n\ndef test_d():\n    pass\n",
    }
    assert preflight_order("pkg.core.f() is wrong", sources) == ["tests/test_uses_core.py"]
    assert preflight_order("`tests/far/test_extra.py::test_c` fails in pkg", sources) == [
        "tests/far/test_extra.py", "tests/far/test_other.py"]
    assert preflight_order("import pkg; pkg.f() is wrong", sources) == []


def test_a_stopped_preflight_gives_the_whole_suites_pace() -> None:
    """A pre-flight that ran 100 of 1,000 tests in 19 s (a tenth of the whole run being pytest's start): the
    whole suite is expected to take 100 s, and a later step's allowance is planned at that pace."""
    from agentflow.repair.verify.testshare import TestTimeShare

    budget = TestTimeShare(limit_s=600.0, share=0.3)
    assert budget.preflight_timeout(300.0, 5.0) == 200.0  # a third of the share
    assert TestTimeShare().preflight_timeout(300.0, 5.0) == 300.0  # no share: its own
    budget.measured(19.0, 1000, ran=100)
    assert budget.base_s is not None and abs(budget.base_s - 100.0) < 1e-6
    assert budget.allow(300.0, 5.0).tests is None
