"""The real-package task set (examples/real-tasks) is sound: the packages' own suites catch each injected bug,
the gold patches resolve every task through `agentflow eval` in the Docker sandbox, an empty patch none, and
each task's recorded gold function is the one its gold patch edits."""

from __future__ import annotations

import ast
import asyncio
import json
import re
import subprocess
from pathlib import Path

import pytest

from agentflow.cli.main import run
from agentflow.sandbox import open_sandbox
from agentflow.swe.evaluate import run_prediction
from agentflow.swe.tasks import load_predictions, load_tasks
from agentflow.swe.workspace import snapshot_commit

from .conftest import read_jsonl, write_jsonl

REAL = Path(__file__).resolve().parents[2] / "examples" / "real-tasks"
TASKS_FILE, GOLD_FILE = REAL / "tasks.jsonl", REAL / "gold.jsonl"
TASKS = load_tasks(TASKS_FILE)
RECORDS = {r["instance_id"]: r for r in read_jsonl(TASKS_FILE)}
IDS = sorted(t.instance_id for t in TASKS)
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? ")


def _package(instance_id: str) -> str:
    return instance_id.split("__", 1)[0]


def test_twenty_tasks_over_eight_packages_with_licenses_and_reports():
    assert len(TASKS) >= 20
    assert len({_package(i) for i in IDS}) >= 8
    assert {p.instance_id for p in load_predictions(GOLD_FILE)} == set(IDS)
    assert len({t.repo for t in TASKS}) == len(TASKS)  # each task holds its own buggy tree
    for task in TASKS:
        repo = task.resolve_path(task.repo)
        assert list(repo.glob("LICENSE*")), f"{task.instance_id}: no license file in {repo}"
        assert len(task.problem_statement) > 200
        text = task.problem_statement
        gold_files = {f.split(":", 1)[0] for f in RECORDS[task.instance_id]["gold_functions"]}
        for gold_file in gold_files:  # a report names the call, never the file or a private helper
            assert gold_file not in text, task.instance_id
        for func in RECORDS[task.instance_id]["gold_functions"]:
            name = func.rsplit(":", 1)[1].split(".")[-1]
            if name.startswith("_") and not name.startswith("__"):
                assert name not in text, task.instance_id
        assert "diff --git" not in text and task.test_patch == ""


def _removed_lines(patch: str) -> dict[str, list[int]]:
    """Line numbers (in the base file) that the patch removes or next to which it inserts, by file."""
    out: dict[str, list[int]] = {}
    path, line = "", 0
    for text in patch.splitlines():
        if text.startswith("--- a/"):
            path = text[len("--- a/"):]
        elif match := _HUNK.match(text):
            line = int(match.group(1))
        elif text.startswith("-") and not text.startswith("---"):
            out.setdefault(path, []).append(line)
            line += 1
        elif text.startswith("+") and not text.startswith("+++"):
            out.setdefault(path, []).append(max(line - 1, 1))
        elif text.startswith(" "):
            line += 1
    return out


def _enclosing(node: ast.AST, lineno: int, prefix: str = "") -> str:
    """The outermost `function` or `Class.method` around a line (nested helpers count as their outer
    function: that is what a localizer names; definitions under `if`/`try` count); '' if none."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and _spans(child, lineno):
            return f"{prefix}{child.name}"
        if isinstance(child, ast.ClassDef):
            found = _enclosing(child, lineno, f"{prefix}{child.name}.")
        elif not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found = _enclosing(child, lineno, prefix)
        else:
            found = ""
        if found:
            return found
    return ""


def _spans(node: ast.FunctionDef | ast.AsyncFunctionDef, lineno: int) -> bool:
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return start <= lineno <= (node.end_lineno or node.lineno)


@pytest.mark.parametrize("iid", IDS)
def test_folder_is_the_base_commit_and_the_gold_patch_applies(iid: str, tmp_path: Path):
    record = RECORDS[iid]
    assert snapshot_commit(REAL / record["repo"], tmp_path / "r") == record["base_commit"]
    check = subprocess.run(["git", "apply", "--check", "-"], cwd=tmp_path / "r", input=record["patch"].encode(),
                           capture_output=True, check=False)
    assert check.returncode == 0, check.stderr.decode()
    reverse = subprocess.run(["git", "apply", "--check", "-R", "-"], cwd=tmp_path / "r",
                             input=record["patch"].encode(), capture_output=True, check=False)
    assert reverse.returncode != 0  # the folder holds the buggy state, not the fixed one


@pytest.mark.parametrize("iid", IDS)
def test_gold_functions_are_what_the_gold_patch_edits(iid: str):
    record = RECORDS[iid]
    repo = REAL / record["repo"]
    edited = set()
    for path, lines in _removed_lines(record["patch"]).items():
        tree = ast.parse((repo / path).read_text())
        edited |= {f"{path}:{_enclosing(tree, n)}" for n in lines}
    assert sorted(edited) == sorted(record["gold_functions"])


async def _base_report(task, image: str):
    async with open_sandbox("docker", {"image": image}) as sb:
        return await run_prediction(sb, task, "", run_empty=True, rerun_failed=False)


ONE_PER_PACKAGE = sorted({_package(i): i for i in reversed(IDS)}.values())


@pytest.mark.slow
async def test_one_task_per_package_is_sound_in_the_local_sandbox():
    """Without Docker too: the bug is caught at base and the gold patch resolves (requirements from the
    wheelhouse included), one task per package."""
    gold = {p.instance_id: p.model_patch for p in load_predictions(GOLD_FILE)}
    tasks = {t.instance_id: t for t in TASKS}
    gate = asyncio.Semaphore(2)

    async def one(iid: str):
        async with gate:
            async with open_sandbox("local") as sb:
                base = await run_prediction(sb, tasks[iid], "", run_empty=True, rerun_failed=False)
            async with open_sandbox("local") as sb:
                fixed = await run_prediction(sb, tasks[iid], gold[iid], rerun_failed=False)
            return iid, base, fixed

    assert len(ONE_PER_PACKAGE) >= 8
    for iid, base, fixed in await asyncio.gather(*(one(i) for i in ONE_PER_PACKAGE)):
        assert base.completed and fixed.completed, (iid, base.error, fixed.error)
        assert sorted(base.tests_status["FAIL_TO_PASS"]["failure"]) == sorted(tasks[iid].FAIL_TO_PASS), iid
        assert base.tests_status["PASS_TO_PASS"]["failure"] == [], iid
        assert fixed.resolved and not base.resolved, iid


@pytest.mark.docker
@pytest.mark.slow
async def test_fail_to_pass_fails_and_pass_to_pass_passes_at_base(docker_image: str):
    gate = asyncio.Semaphore(2)

    async def one(task):
        async with gate:
            return task, await _base_report(task, docker_image)

    for task, report in await asyncio.gather(*(one(t) for t in TASKS)):
        assert report.completed, (task.instance_id, report.error)
        status = report.tests_status
        assert status["FAIL_TO_PASS"]["success"] == [], task.instance_id
        assert sorted(status["FAIL_TO_PASS"]["failure"]) == sorted(task.FAIL_TO_PASS), task.instance_id
        assert status["PASS_TO_PASS"]["failure"] == [], task.instance_id
        assert len(status["PASS_TO_PASS"]["success"]) == len(task.PASS_TO_PASS), task.instance_id
        assert not report.resolved


@pytest.mark.docker
@pytest.mark.slow
def test_eval_gold_resolves_all_and_empty_none(docker_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    args = ["--tasks", str(TASKS_FILE), "--json", "--sandbox", "docker", "-w", "2"]
    assert run(["eval", str(GOLD_FILE), *args, "-o", str(tmp_path / "gold")]) == 0
    gold = json.loads(capsys.readouterr().out)
    assert gold["resolved_ids"] == IDS
    assert gold["resolved_instances"] == gold["total_instances"] == len(IDS)
    assert gold["unresolved_instances"] == gold["error_instances"] == 0

    empty = [{"instance_id": i, "model_name_or_path": "empty", "model_patch": ""} for i in IDS]
    path = write_jsonl(tmp_path / "empty.jsonl", empty)
    assert run(["eval", str(path), *args, "-o", str(tmp_path / "empty")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["resolved_instances"] == 0
    assert summary["empty_patch_instances"] == len(IDS)
