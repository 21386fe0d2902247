"""Item 7: the repository under test cannot take the test runner's place.

`python -m pytest` puts the workspace first on sys.path before pytest is imported: a root `pytest.py`, a
`_pytest` package or a standard-library `json.py` in the workspace ran instead of the real module and could
report every test as passed. Two defences, each tested on its own here: the harness starts pytest from
a runner script that loads it from the environment (these files can sit in the workspace and change
nothing), and the allowlist removes such modules when a patch adds them (`test_grading.py` grades the patches).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentflow.sandbox import open_sandbox
from agentflow.sandbox.config import SandboxConfig
from agentflow.swe.evaluate import run_prediction
from agentflow.swe.guard import BaseFacts, is_library_path, not_library, pythonpath_roots, shadowed_module
from agentflow.swe.patch import FileChange
from agentflow.swe.tasks import SWETask, load_tasks
from agentflow.swe.testrun import runner_command
from agentflow.swe.workspace import seed_workspace

from .conftest import TASKS_FILE
from .test_grading import FAKE_RUN, _new_file

IID = "inikit__inikit-1"


BASE = BaseFacts(existing={"inikit/__init__.py", "src/pytest/__init__.py", "json.py"})
"""A base commit with the package `inikit`, pytest's own `src/pytest` and a top-level module `json.py`."""


def _restored(path: str, facts: BaseFacts = BASE) -> bool:
    return not is_library_path(path, facts, created=path not in facts.existing)


@pytest.mark.parametrize(
    ("path", "restored"),
    [
        ("pytest.py", True),
        ("_pytest/__init__.py", True),
        ("pluggy/__init__.py", True),
        ("json.py", False),  # the base has it: the repository's own module
        ("unittest/__init__.py", True),
        ("src/json.py", True),
        ("json.cpython-311-x86_64-linux-gnu.so", True),
        ("agentflow_results_plugin.py", True),
        ("inikit/json.py", False),  # a submodule, inikit.json: shadows nothing
        ("inikit/values.py", False),
        ("pytest/__main__.py", True),  # outside every package root of the base
    ],
)
def test_a_module_the_patch_adds_outside_the_package_roots_is_removed(path: str, restored: bool) -> None:
    assert _restored(path) is restored


def test_a_module_the_base_already_has_is_the_repositorys_own_code() -> None:
    # pytest's own repository changes src/pytest/__init__.py in real fixes: that is the code under test
    assert not _restored("src/pytest/__init__.py")
    renamed = [FileChange("inikit/mod.py", "json.py", "0", "0")]
    assert not_library(renamed, BaseFacts(existing={"inikit/__init__.py", "inikit/mod.py"})) == ["json.py"]


def test_the_folders_on_sys_path_come_from_the_base_configuration_and_the_tests() -> None:
    configs = ['[tool.pytest.ini_options]\npythonpath = ["lib", "./other/"]\n', "[pytest]\npythonpath = . ../up /abs\n"]
    assert pythonpath_roots(configs) == {"lib", "other", ""}
    assert shadowed_module("lib/pytest.py", ["lib"]) == "pytest"
    assert shadowed_module("lib/pytest.py", ["", "src"]) is None
    facts = BaseFacts(existing={"inikit/__init__.py"}, sys_path=["", "inikit/probe"])
    assert _restored("inikit/probe/json.py", facts)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("python3 -m pytest -rfE", "python3 .sc/agentflow_pytest.py -rfE"),
        ("'/my env/python' -m pytest", "'/my env/python' .sc/agentflow_pytest.py"),
        ("/opt/venv/bin/python3.9 -m pytest -x tests", "/opt/venv/bin/python3.9 .sc/agentflow_pytest.py -x tests"),
        ("cd sub && python -m pytest", "cd sub && python -m pytest"),  # the relative runner path would miss
        ("pytest -q", "pytest -q"),
        ("python -m pytest_cov", "python -m pytest_cov"),
        ("tox -- -m pytest", "tox -- -m pytest"),
    ],
)
def test_python_m_pytest_is_started_by_the_runner_script(command: str, expected: str) -> None:
    assert runner_command(command, ".sc") == expected


@pytest.fixture(scope="module")
def task() -> SWETask:
    return next(t for t in load_tasks(TASKS_FILE) if t.instance_id == IID)


@pytest.mark.docker
@pytest.mark.parametrize(
    ("module", "test_cmd"),
    [
        ("pytest.py", None),
        ("_pytest/__init__.py", None),
        ("json.py", None),
        ("pytest.py", "python3 -m pytest -rfE -p no:cacheprovider"),
    ],
    ids=["root-pytest", "pytest-package", "stdlib-json", "task-command"],
)
async def test_a_runner_lookalike_in_the_workspace_does_not_run_the_tests(
    docker_image: str, task: SWETask, module: str, test_cmd: str | None
) -> None:
    """No guard involved: the file is in the workspace (as model-written code in repair could leave it)."""
    task = task.model_copy(update={"test_cmd": test_cmd})
    async with open_sandbox("docker", SandboxConfig(image=docker_image)) as sb:
        await seed_workspace(sb, task)
        await sb.write_file(module, FAKE_RUN)
        report = await run_prediction(sb, task, None, run_empty=True, rerun_failed=False, seed=False)
    assert report.error is None, report.error
    assert report.resolved is False  # the bug of the base commit is still there
    status = report.tests_status
    assert status["FAIL_TO_PASS"]["failure"] == task.FAIL_TO_PASS
    assert sorted(status["PASS_TO_PASS"]["success"]) == sorted(task.PASS_TO_PASS)  # the real tests ran


@pytest.mark.docker
async def test_blind_repair_verification_does_not_take_a_runner_lookalike_for_passing_tests(
    docker_image: str, tmp_path: Path
) -> None:
    from agentflow.repair.config import load_repair_config
    from agentflow.repair.verify.workbench import HowToVerify, Workbench
    from agentflow.swe.workspace import repo_task

    (tmp_path / "mod.py").write_text("def f():\n    return 2\n")
    (tmp_path / "test_mod.py").write_text("from mod import f\n\n\ndef test_f():\n    assert f() == 1\n")
    cfg = load_repair_config([f"sandbox.image={docker_image}", "backend=docker"])
    async with open_sandbox("docker", cfg.sandbox) as sandbox:
        bench = Workbench(sandbox, repo_task(tmp_path, "f() should return 1"), cfg, "python3")
        await bench.setup()
        assert bench.mode == "repo"
        base = await bench.verify_base()
        # model-written commands can leave files in the scratch folder, where the runner script lives
        await sandbox.write_file(".agentflow_eval/pytest.py", FAKE_RUN)
        how = HowToVerify(base=base)
        fake, _ = await bench.verify(_new_file("pytest.py", "import sys\nprint('all passed')\nsys.exit(0)\n"), how)
        fix, _ = await bench.verify("--- a/mod.py\n+++ b/mod.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 2\n+    return 1\n", how)
    assert base.passed is False
    assert fake.passed is False, fake
    assert fix.passed is True, fix
