"""Harness pieces on purpose-built repositories: deterministic base commits, git-dir repos, flaky tests,
SWE-bench grading rules."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from agentflow.errors import UserError
from agentflow.sandbox import open_sandbox
from agentflow.swe.evaluate import run_prediction
from agentflow.swe.report import InstanceReport, grade, make_summary
from agentflow.swe.tasks import Prediction, SWETask, load_tasks
from agentflow.swe.testrun import parse_summary
from agentflow.swe.workspace import host_repo, snapshot_commit

from .conftest import TASKS_FILE

FLAKY_TEST = '''import os


def test_stable():
    assert True


def test_flaky():
    marker = os.path.join(os.path.dirname(__file__), ".ran_once")
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise AssertionError("first run fails")
'''


def _make_repo(root: Path) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "mod.py").write_text("VALUE = 1\n")
    (root / "tests" / "test_mod.py").write_text(FLAKY_TEST)
    return root


def _task(repo: str, base: str, **kw) -> SWETask:
    fields = {
        "instance_id": "demo__demo-1", "repo": repo, "base_commit": base,
        "FAIL_TO_PASS": ["tests/test_mod.py::test_flaky"], "PASS_TO_PASS": ["tests/test_mod.py::test_stable"],
    }
    return SWETask.model_validate({**fields, **kw})


def test_example_base_commits_are_reproducible(tmp_path: Path):
    for i, task in enumerate({t.repo: t for t in load_tasks(TASKS_FILE)}.values()):
        _, src = task.repo_source()
        assert snapshot_commit(src, tmp_path / f"r{i}") == task.base_commit


def test_changed_directory_is_reported(tmp_path: Path):
    src = _make_repo(tmp_path / "src")
    base = snapshot_commit(src, tmp_path / "snap")
    (src / "mod.py").write_text("VALUE = 2\n")
    with pytest.raises(UserError, match="snapshots to commit"):
        host_repo(_task(str(src), base), tmp_path / "cache")


async def test_seeded_workspace_head_is_base_commit_and_flaky_tests_are_flagged(tmp_path: Path):
    src = _make_repo(tmp_path / "src")
    base = snapshot_commit(src, tmp_path / "snap")
    task = _task(str(src), base)
    patch = "--- a/mod.py\n+++ b/mod.py\n@@ -1 +1 @@\n-VALUE = 1\n+VALUE = 2\n"
    async with open_sandbox("local") as sb:
        report = await run_prediction(sb, task, patch)
        head = (await sb.exec("git rev-parse HEAD")).stdout.strip()
    assert head == base
    assert report.patch_successfully_applied and report.completed
    # first run is what counts (as in SWE-bench); the rerun flags the test as flaky
    assert report.tests_status["FAIL_TO_PASS"]["failure"] == ["tests/test_mod.py::test_flaky"]
    assert not report.resolved
    assert report.flaky_tests == ["tests/test_mod.py::test_flaky"]


def _commit_all(src: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "one"]):
        subprocess.run(cmd, cwd=src, check=True, env=env)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, check=True, capture_output=True, text=True).stdout.strip()


async def test_git_repository_at_a_commit(tmp_path: Path):
    src = _make_repo(tmp_path / "gitrepo")
    (src / "tests" / "test_mod.py").write_text("import mod\n\n\ndef test_value():\n    assert mod.VALUE == 2\n")
    base = await asyncio.to_thread(_commit_all, src)
    (src / "mod.py").write_text("VALUE = 99\n")  # uncommitted changes must not leak into the workspace
    task = _task(str(src), base, FAIL_TO_PASS=["tests/test_mod.py::test_value"], PASS_TO_PASS=[])
    patch = "--- a/mod.py\n+++ b/mod.py\n@@ -1 +1 @@\n-VALUE = 1\n+VALUE = 2\n"
    async with open_sandbox("local") as sb:
        report = await run_prediction(sb, task, patch)
    assert report.resolved, report.error


async def test_setup_command_failure_is_an_error_not_a_crash(tmp_path: Path):
    src = _make_repo(tmp_path / "src")
    task = _task(str(src), snapshot_commit(src, tmp_path / "snap"), setup_commands=["exit 3"])
    async with open_sandbox("local") as sb:
        report = await run_prediction(sb, task, "--- a/mod.py\n+++ b/mod.py\n@@ -1 +1 @@\n-VALUE = 1\n+VALUE = 2\n")
    assert not report.completed and "setup command" in (report.error or "")


def test_grading_follows_swe_bench_but_an_xfail_is_no_pass():
    status = {"a": "PASSED", "b": "XFAIL", "c": "SKIPPED", "d": "FAILED", "e": "ERROR"}
    tests, resolved = grade(["a"], ["a", "b", "c"], status)
    assert resolved and tests["PASS_TO_PASS"]["success"] == ["a", "b", "c"]
    tests, resolved = grade(["a", "b"], ["a"], status)  # an xfailed FAIL_TO_PASS test is not a pass (issue #50)
    assert not resolved and tests["FAIL_TO_PASS"]["failure"] == ["b"]
    tests, resolved = grade(["a", "c"], ["a"], status)  # a skipped FAIL_TO_PASS test is not a pass
    assert not resolved and tests["FAIL_TO_PASS"]["failure"] == ["c"]
    tests, resolved = grade(["a"], ["missing"], status)  # a test that did not run fails
    assert not resolved and tests["PASS_TO_PASS"]["failure"] == ["missing"]


def test_summary_counts():
    tasks = [_task(".", "abcd", instance_id=f"t{i}") for i in range(5)]
    preds = [Prediction(instance_id=f"t{i}", model_patch="p") for i in range(4)]
    reports = [
        InstanceReport(instance_id="t0", patch_exists=True, completed=True, resolved=True),
        InstanceReport(instance_id="t1", patch_exists=True, completed=True),
        InstanceReport(instance_id="t2", patch_exists=False),
        InstanceReport(instance_id="t3", patch_exists=True, error="boom"),
    ]
    s = make_summary(tasks, preds, reports)
    assert (s["total_instances"], s["submitted_instances"], s["completed_instances"]) == (5, 4, 2)
    assert (s["resolved_ids"], s["unresolved_ids"], s["empty_patch_ids"], s["error_ids"], s["incomplete_ids"]) == (
        ["t0"], ["t1"], ["t2"], ["t3"], ["t4"]
    )


def test_summary_lines_are_parsed():
    out = "PASSED tests/a.py::test_x\nFAILED tests/a.py::test_y - assert 0\nXPASS tests/a.py::test_z\nnoise\n"
    assert parse_summary(out) == {"tests/a.py::test_x": "PASSED", "tests/a.py::test_y": "FAILED", "tests/a.py::test_z": "PASSED"}


def _write_wheel(folder: Path) -> None:
    """A minimal pure-Python wheel, built by hand (no network, no build backend)."""
    import base64
    import hashlib
    import zipfile

    files = {
        "afdemo_dep/__init__.py": "ANSWER = 42\n",
        "afdemo_dep-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: afdemo-dep\nVersion: 1.0\n",
        "afdemo_dep-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    record.append("afdemo_dep-1.0.dist-info/RECORD,,")
    files["afdemo_dep-1.0.dist-info/RECORD"] = "\n".join(record) + "\n"
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / "afdemo_dep-1.0-py3-none-any.whl", "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)


async def test_requirements_install_offline_from_a_wheelhouse(tmp_path: Path):
    src = tmp_path / "repo"
    (src / "tests").mkdir(parents=True)
    (src / "mod.py").write_text("from afdemo_dep import ANSWER\n\n\ndef answer():\n    return ANSWER - 1\n")
    (src / "tests" / "test_mod.py").write_text("import mod\n\n\ndef test_answer():\n    assert mod.answer() == 42\n")
    _write_wheel(tmp_path / "wheels")
    base = snapshot_commit(src, tmp_path / "snap")
    task = _task(
        str(src), base, FAIL_TO_PASS=["tests/test_mod.py::test_answer"], PASS_TO_PASS=[],
        requirements=["afdemo-dep==1.0"], wheelhouse=str(tmp_path / "wheels"),
    )
    fix = "--- a/mod.py\n+++ b/mod.py\n@@ -4 +4 @@\n-    return ANSWER - 1\n+    return ANSWER\n"
    async with open_sandbox("local") as sb:
        report = await run_prediction(sb, task, fix)
    assert report.resolved, report.error


async def test_model_edits_to_test_files_are_reset_before_the_test_patch():
    task = next(t for t in load_tasks(TASKS_FILE) if t.instance_id == "inikit__inikit-1")
    tamper = (
        "--- a/tests/test_parser.py\n+++ b/tests/test_parser.py\n@@ -1,3 +1,3 @@\n"
        "-import pytest\n+import pytest  # edited by the model\n \n from inikit import ParseError, loads\n"
    )
    async with open_sandbox("local") as sb:
        report = await run_prediction(sb, task, task.patch + tamper)
        content = await sb.read_file("tests/test_parser.py")
    assert report.resolved, report.error
    assert "edited by the model" not in content
