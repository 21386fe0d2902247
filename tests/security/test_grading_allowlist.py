"""Grading by allowlist (issue #50): no patch is graded resolved by changing anything but library code.

The corpus (`hostile_patches.py`) is generated per class: pytest configuration under every name at several
depths, `.pth` / `sitecustomize` / `usercustomize`, entry-point plugins, conftests at any depth, test code
that patches pytest, context / normal / ed-style diffs, control characters in headers, library code that
skips or xfails the failing test, and the earlier attacks. Each patch is graded by `agentflow eval`'s own path
(`evaluate_predictions`, a fresh Docker sandbox per patch) and none is resolved; every gold patch of both
example task sets touches library files only (and resolves: tests/swe/test_examples.py,
tests/swe/test_real_examples.py::test_eval_gold_resolves_all_and_empty_none).
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from agentflow.errors import UserError
from agentflow.swe import testrun
from agentflow.swe.evaluate import EvalConfig, evaluate_predictions
from agentflow.swe.guard import BaseFacts, is_library_path, not_library, root_markers
from agentflow.swe.hostgit import init
from agentflow.swe.patch import FileChange
from agentflow.swe.report import grade
from agentflow.swe.tasks import Prediction, SWETask, load_predictions, load_tasks
from agentflow.swe.testrun import FAILED, PASSED, SKIPPED, XFAIL
from agentflow.swe.tree import patch_files

from .conftest import TASKS_FILE
from .hostile_patches import IID, REPO, corpus

CORPUS = corpus()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LIBRARY_PARTS = {"inikit/_force.py", "inikit/errors.py", "inikit/__init__.py"}
"""Files of the corpus that are library code on purpose (the forcing plugin, harmless edits, skip/xfail)."""


def git_files(patch: str) -> list[FileChange] | None:
    """The files git on the host reads in `patch` (None when git does not read it as a patch)."""
    with tempfile.TemporaryDirectory() as tmp:
        scratch = init(Path(tmp) / "scratch")
        try:
            return patch_files(patch.encode("utf-8", "surrogateescape"), scratch)
        except UserError:
            return None


def facts_from_folder(repo: Path, files: list[FileChange], test_ids: list[str]) -> BaseFacts:
    """`guard.base_facts` read from a task's repository folder (its base commit's files) instead of git."""
    asked = {m for fc in files for p in fc.paths for m in [*root_markers(p), p]}
    return BaseFacts(existing={p for p in asked if (repo / p).is_file()}, test_files=set(testrun.test_files(test_ids)))


def _task() -> SWETask:
    return next(t for t in load_tasks(TASKS_FILE) if t.instance_id == IID)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_every_file_of_a_hostile_patch_but_the_library_ones_is_restored(name: str) -> None:
    files = git_files(CORPUS[name])
    if files is None:
        return  # git does not read it: not applied, not graded (the Docker test below grades it)
    task = _task()
    paths = {p for fc in files for p in fc.paths}
    restored = set(not_library(files, facts_from_folder(REPO, files, [*task.FAIL_TO_PASS, *task.PASS_TO_PASS])))
    assert paths - LIBRARY_PARTS <= restored, name
    assert not (restored & LIBRARY_PARTS), name


def _gold_sets() -> list[tuple[str, SWETask, str]]:
    out = []
    for folder in ("swe-tasks", "real-tasks"):
        tasks = {t.instance_id: t for t in load_tasks(EXAMPLES / folder / "tasks.jsonl")}
        for pred in load_predictions(EXAMPLES / folder / "gold.jsonl"):
            out.append((folder, tasks[pred.instance_id], pred.model_patch or ""))
    return out


GOLD = _gold_sets()


@pytest.mark.parametrize(("folder", "task", "patch"), GOLD, ids=[t.instance_id for _, t, _ in GOLD])
def test_every_gold_patch_touches_library_files_only(folder: str, task: SWETask, patch: str) -> None:
    files = git_files(patch)
    assert files, task.instance_id
    repo = task.resolve_path(task.repo)
    facts = facts_from_folder(repo, files, [*task.FAIL_TO_PASS, *task.PASS_TO_PASS])
    assert not_library(files, facts) == [], task.instance_id


@pytest.mark.parametrize(
    ("path", "library"),
    [
        ("inikit/parser.py", True), ("inikit/new_module.py", True), ("inikit/sub/new.py", True),
        ("inikit/data.json", True), ("src/cachetools/__init__.py", True), ("six.py", True),
        ("new_top_level.py", False), ("src/new_top_level.py", False), ("docs/conf.py", False),
        ("inikit/conftest.py", False), ("inikit/pytest.ini", False), ("inikit/setup.cfg", False),
        ("inikit/pyproject.toml", False), ("inikit/.pytest.ini", False), ("inikit/x.pth", False),
        ("inikit/sitecustomize.py", False), ("inikit/usercustomize.py", False), ("setup.py", False),
        ("inikit/tests/test_x.py", False), ("inikit/test_x.py", False), ("inikit/x_test.py", False),
        ("inikit/testing/__init__.py", False), ("tests/__init__.py", False), ("tests/helpers.py", False),
        ("inikit/x.dist-info/entry_points.txt", False), ("inikit/x.egg-info/entry_points.txt", False),
        ("inikit/__pycache__/parser.cpython-311.pyc", False), ("inikit/_speedups.so", False),
        ("inikit/.hidden/x.py", False), ("inikit/checks.py", False), ("inikit/plug.py", False),
        (".agentflow_eval/sitecustomize.py", False), ("../escape.py", False),
    ],
)
def test_the_allowlist_rule(path: str, library: bool) -> None:
    """Library source: inside a package root of the base commit, a source or data file, no test, no file
    Python or pytest loads by itself, no plugin module."""
    facts = BaseFacts(
        existing={"inikit/__init__.py", "inikit/parser.py", "src/cachetools/__init__.py", "six.py", "setup.py"},
        plugins={"inikit.plug"},
        test_files={"inikit/checks.py"},
    )
    assert is_library_path(path, facts, created=path not in facts.existing) is library


def test_a_created_module_standing_in_for_the_runner_next_to_a_test_file_is_not_library() -> None:
    facts = BaseFacts(existing={"inikit/__init__.py"}, sys_path=["", "src", "inikit/probe"])
    assert not is_library_path("inikit/probe/json.py", facts, created=True)
    assert is_library_path("inikit/probe/json.py", facts, created=False)  # the repository's own module
    assert is_library_path("inikit/json.py", facts, created=True)  # inikit.json shadows nothing


@pytest.mark.parametrize(("outcome", "resolved"), [(PASSED, True), (XFAIL, False), (SKIPPED, False), (FAILED, False)])
def test_a_fail_to_pass_test_that_ends_skipped_or_xfailed_has_not_passed(outcome: str, resolved: bool) -> None:
    assert grade(["t::f2p"], ["t::p2p"], {"t::f2p": outcome, "t::p2p": PASSED})[1] is resolved


@pytest.fixture(scope="module")
def graded(docker_image: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every hostile patch graded by `evaluate_predictions`, each as its own instance in a fresh sandbox."""
    import asyncio

    task = _task()
    names = sorted(CORPUS)
    tasks = [task.model_copy(update={"instance_id": f"{IID}.{i}"}) for i in range(len(names))]
    preds = [Prediction(instance_id=t.instance_id, model_name_or_path="hostile", model_patch=CORPUS[n])
             for t, n in zip(tasks, names)]
    cfg = EvalConfig.model_validate(
        {"backend": "docker", "workers": 4, "rerun_failed": False, "sandbox": {"image": docker_image}})
    full = asyncio.run(evaluate_predictions(tasks, preds, cfg, out_dir=tmp_path_factory.mktemp("hostile")))
    assert full["sandbox_backend"] == "docker"
    return {n: full["instances"][t.instance_id] for n, t in zip(names, tasks)}


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_no_hostile_patch_is_graded_resolved(graded: dict[str, Any], name: str) -> None:
    inst = graded[name]
    assert inst["resolved"] is False, (name, inst)
    files = git_files(CORPUS[name])
    if inst["patch_successfully_applied"] and files:
        outside = {p for fc in files for p in fc.paths} - LIBRARY_PARTS
        assert outside <= set(inst["restored_files"]), (name, inst)
    if name.startswith("library:"):  # the library's skip/xfail reached the failing test: not a pass
        assert inst["tests_status"]["FAIL_TO_PASS"]["failure"] == _task().FAIL_TO_PASS, (name, inst)


async def test_grading_loads_only_the_plugins_a_task_names(tmp_path: Path) -> None:
    """Plugin autoloading is off in grading: a plugin installed where pytest would find it (here the host's
    pytest-asyncio, on the local backend) loads only when the task names it (`pytest_plugins`)."""
    from agentflow.sandbox import open_sandbox
    from agentflow.swe.evaluate import run_prediction

    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "mod.py").write_text("def value():\n    return 1\n")
    (repo / "tests" / "test_mod.py").write_text(
        "import pytest\n\nfrom mod import value\n\n\n@pytest.mark.asyncio\nasync def test_value():\n    assert value() == 2\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=repo, check=True)
    fix = "--- a/mod.py\n+++ b/mod.py\n@@ -1,2 +1,2 @@\n def value():\n-    return 1\n+    return 2\n"
    task = SWETask(instance_id="asyncmod-1", repo=str(repo), base_commit="HEAD", FAIL_TO_PASS=["tests/test_mod.py::test_value"])
    reports = []
    for plugins in ([], ["pytest_asyncio.plugin"]):
        async with open_sandbox("local") as sb:
            named = task.model_copy(update={"pytest_plugins": plugins})
            reports.append(await run_prediction(sb, named, fix, rerun_failed=False))
    unnamed, named_report = reports
    assert unnamed.completed and not unnamed.resolved, unnamed  # the async test did not run as one
    assert named_report.resolved, named_report
