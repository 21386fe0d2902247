"""Bad input: one line naming the problem, exit 2, no traceback, nothing started."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentflow.cli.main import run

from .conftest import TASKS_FILE


def check(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> None:
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err


def test_missing_repo(tmp_path: Path, capsys):
    check(
        ["repair", str(tmp_path / "nope"), "--issue", "x", "-o", str(tmp_path / "r")],
        capsys,
        "repository",
        "not found",
    )


def test_issue_file_not_found(tmp_path: Path, capsys):
    check(
        ["repair", str(tmp_path), "--issue-file", str(tmp_path / "missing.md")],
        capsys,
        "issue file",
        "not found",
    )


def test_no_issue(tmp_path: Path, capsys):
    check(["repair", str(tmp_path), "-o", str(tmp_path / "r")], capsys, "no issue given")


def test_malformed_task_line_is_named_by_line_number(tmp_path: Path, capsys):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(TASKS_FILE.read_text().splitlines()[0] + "\n{not json\n")
    check(["bench", str(tasks), "-o", str(tmp_path / "r")], capsys, f"{tasks}:2")


def test_unknown_instance_id(tmp_path: Path, capsys):
    check(
        ["bench", str(TASKS_FILE), "-i", "nope__nope-1", "-o", str(tmp_path / "r")],
        capsys,
        "unknown instance id 'nope__nope-1'",
    )
    check(["repair", "--tasks", str(TASKS_FILE), "-i", "nope__nope-1"], capsys, "unknown instance id")


def test_bad_flags(tmp_path: Path, capsys):
    check(["bench", str(TASKS_FILE), "--slice", "a:b"], capsys, "--slice")
    check(["bench", str(TASKS_FILE), "--resume"], capsys, "--resume needs the run directory")
    check(["repair", str(tmp_path), "--issue", "x", "--strategy", "greedy"], capsys, "--strategy")
    check(["repair", str(tmp_path), "--issue", "x", "--wall-time", "soon"], capsys, "--wall-time")
    check(["repair", "--tasks", str(TASKS_FILE)], capsys, "--instance-id")


def test_resume_of_a_directory_that_is_no_run(tmp_path: Path, capsys):
    check(["bench", str(TASKS_FILE), "--resume", "-o", str(tmp_path)], capsys, "not a run directory")


def test_a_folder_holding_a_run_s_results_is_refused_and_kept(tmp_path: Path, capsys):
    outcome = tmp_path / "instances" / "x" / "outcome.json"
    outcome.parent.mkdir(parents=True)
    outcome.write_text("{}")
    check(["bench", str(TASKS_FILE), "--slice", "0:1", "-o", str(tmp_path)], capsys,
          "already holds results of a run", "--resume", "--redo")
    assert outcome.read_text() == "{}"
