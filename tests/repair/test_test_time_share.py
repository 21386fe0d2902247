"""The repair's test time is bounded by a share of the task's wall time (`RepairConfig.test_time_share`): the
call-traced localization run and the candidates' verifications that would not fit run only the tests failing at
the base commit, and a run that still times out says so (a `repair.test_time` event and a progress line). Real
Docker sandbox, a suite with a slow test, scripted (replayed) model answers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agentflow.cli.main import run

from .conftest import read_jsonl, scripted_cassette
from .test_preflight import FIX, ISSUE, TESTS, make_repo

pytestmark = pytest.mark.docker

SLOW_TEST = "import time\n\n\ndef test_slow():\n    time.sleep(4)\n"


def repair(out: Path, image: str, repo: Path, cassette: Path, *settings: str) -> int:
    args = ["repair", str(repo), "--issue", ISSUE, "--model", f"replay:{cassette}", "--sandbox", "docker",
            "-c", f"sandbox.image={image}", "-c", "edit.format=search_replace", "-c", "search.concurrency=1",
            "-c", "rank=false", "-o", str(out), "--test-cmd", "pytest -q", "--strategy", "best_of_n", "-n", "1",
            "--json"]
    for setting in settings:
        args += ["-c", setting]
    return run(args)


def time_events(out: Path) -> list[dict]:
    return [e["data"] for e in read_jsonl(out / "events.jsonl") if e.get("kind") == "repair.test_time"]


def test_runs_that_would_exceed_the_share_run_the_failing_tests_instead(docker_image: str, tmp_path: Path,
                                                                         capsys):
    """A 4 s suite, a 3 s share (5% of 60 s): the traced run, the candidate's run and the finalist's whole-suite
    check keep only the failing test; each says so; the fix is still found (the report's run is not shortened)."""
    repo = make_repo(tmp_path / "pager-repo", extra_test=SLOW_TEST)
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 4)
    out = tmp_path / "run"
    assert repair(out, docker_image, repo, cassette, "limits.wall_time_s=60", "tests.time_share=0.05",
                  "mutants=false") == 0
    captured = capsys.readouterr()
    shown = json.loads(captured.out)
    found = time_events(out)
    assert [(f["step"], f["action"], f["tests"]) for f in found] == [("localization", "shortened", 1),
                                                                     ("verification", "shortened", 1),
                                                                     ("confirmation", "shortened", 1)], found
    assert all(f["share_s"] == 3.0 for f in found)
    assert "tests: localization ran 1 of 3 (time share 5%" in captured.err
    assert "tests: verification ran 1 of 3 (time share 5%" in captured.err
    assert "[ran 1 tests, the failing ones first: the run's time allowance]" in captured.err
    assert shown["report"]["resolved"] is True


def test_without_a_share_nothing_is_shortened(docker_image: str, tmp_path: Path, capsys):
    """The same suite with the default share of a long wall time: no run is shortened, no event."""
    repo = make_repo(tmp_path / "pager-repo", extra_test=SLOW_TEST)
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 4)
    out = tmp_path / "run"
    assert repair(out, docker_image, repo, cassette, "limits.wall_time_s=600") == 0
    assert json.loads(capsys.readouterr().out)["report"]["resolved"] is True
    assert time_events(out) == []


def test_a_shortened_run_that_still_times_out_says_so(docker_image: str, tmp_path: Path, capsys):
    """The failing test itself takes 4 s; the share leaves about 1 s: the shortened run times out, and the event
    and the progress line say so."""
    slow_failing = TESTS.replace("def test_first_page():\n", "def test_first_page():\n    time.sleep(4)\n")
    repo = make_repo(tmp_path / "pager-repo", extra_test=None)
    (repo / "tests" / "test_pager.py").write_text("import time\n" + slow_failing)

    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qam", "slow"],
                   cwd=repo, check=True)
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 4)
    out = tmp_path / "run"
    repair(out, docker_image, repo, cassette, "limits.wall_time_s=60", "tests.time_share=0.02",
           "tests.timeout_floor_s=1")
    err = capsys.readouterr().err
    timed_out = [f for f in time_events(out) if f["action"] == "timed_out"]
    assert timed_out and timed_out[0]["shortened"] is True, time_events(out)
    assert "tests: localization timed out after" in err and "(shortened run)" in err
