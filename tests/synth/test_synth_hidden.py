"""`agentflow tasks synth --hide-tests` end to end in the Docker sandbox: the failing tests leave the base, the
test patch puts back exactly them, the statement names none of them, eval-style grading resolves with gold."""

from __future__ import annotations

import ast
import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentflow.swe.evaluate import EvalConfig, evaluate_predictions
from agentflow.swe.tasks import load_predictions, load_tasks
from agentflow.synth.build import SynthConfig, synthesize
from agentflow.synth.hide import hidden_functions

from .fixture import TESTS, write_repo

SETTINGS = {"seed": 7, "limit": 3, "max_candidates": 8, "max_failing": 5, "hide_tests": True}
TEST_FILE = "tests/test_core.py"


def _config(image: str) -> SynthConfig:
    return SynthConfig.model_validate({**SETTINGS, "backend": "docker", "sandbox": {"image": image}})


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _defined(text: str) -> set[str]:
    return {n.name for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef)}


@pytest.fixture(scope="module")
def hidden(docker_image: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("synth-hidden")
    write_repo(root / "minipkg", src_layout=True)
    report = asyncio.run(synthesize(root / "minipkg", root / "out", _config(docker_image)))
    assert len(report.tasks) == SETTINGS["limit"], report
    return root


@pytest.mark.docker
def test_hidden_tests_are_absent_at_base_and_the_test_patch_restores_exactly_them(hidden: Path, tmp_path: Path) -> None:
    out = hidden / "out"
    for task in load_tasks(out / "tasks.jsonl"):
        names = {f[-1] for f in hidden_functions(task.FAIL_TO_PASS)[TEST_FILE]}
        base = (out / task.repo / TEST_FILE).read_text()
        assert not names & _defined(base) and _defined(base) == _defined(TESTS) - names
        work = tmp_path / task.instance_id
        shutil.copytree(out / task.repo, work)
        subprocess.run(["git", "init", "-q"], cwd=work, check=True)
        subprocess.run(["git", "apply", "-"], cwd=work, input=task.test_patch, text=True, check=True)
        assert (work / TEST_FILE).read_text() == TESTS
        added = [x for x in task.test_patch.splitlines() if x.startswith("+") and not x.startswith("+++")]
        removed = [x for x in task.test_patch.splitlines() if x.startswith("-") and not x.startswith("---")]
        assert not removed and {x[5:].split("(", 1)[0] for x in added if x.startswith("+def ")} == names


@pytest.mark.docker
def test_the_base_suite_passes_without_the_test_patch(hidden: Path, tmp_path: Path) -> None:
    for task in load_tasks(hidden / "out" / "tasks.jsonl"):
        repo = shutil.copytree(hidden / "out" / task.repo, tmp_path / task.instance_id)  # a run writes caches
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=repo,
                              env={"PYTHONPATH": str(repo / "src"), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout[-2000:]


@pytest.mark.docker
def test_statements_name_no_test_and_no_change(hidden: Path) -> None:
    for line in (hidden / "out" / "tasks.jsonl").read_text().splitlines():
        task = json.loads(line)
        statement = task["problem_statement"]
        path = task["patch"].split("\n", 1)[0].split(" b/", 1)[1]
        changed = [x[1:].strip() for x in task["patch"].splitlines()
                   if x[:1] in "+-" and not x.startswith(("+++", "---")) and x[1:].strip()]
        names = {f[-1] for f in hidden_functions(json.loads(task["FAIL_TO_PASS"]))[TEST_FILE]}
        assert path not in statement and path.removeprefix("src/") not in statement
        assert not [c for c in changed if c in statement], (task["instance_id"], changed)
        assert "::" not in statement and TEST_FILE not in statement and not [n for n in names if n in statement]


@pytest.mark.docker
def test_eval_grading_resolves_with_gold_and_not_without(hidden: Path, docker_image: str, tmp_path: Path) -> None:
    out = hidden / "out"
    tasks = load_tasks(out / "tasks.jsonl")
    cfg = EvalConfig.model_validate({"backend": "docker", "workers": 2, "sandbox": {"image": docker_image}})
    full = asyncio.run(evaluate_predictions(tasks, load_predictions(out / "gold.jsonl"), cfg, out_dir=tmp_path / "gold"))
    assert full["resolved_instances"] == len(tasks) and full["error_instances"] == 0


@pytest.mark.docker
def test_same_seed_gives_the_same_bytes(hidden: Path, docker_image: str) -> None:
    asyncio.run(synthesize(hidden / "minipkg", hidden / "again", _config(docker_image)))
    first, second = _files(hidden / "out"), _files(hidden / "again")
    assert first == second and "tasks.jsonl" in first
