"""Item 4, 6 and 7: a model patch cannot grade itself, and huge test lists run.

Each hostile patch leaves the bug in place and adds a way to make the tests look green: a root conftest.py,
a plugin named in pytest.ini's addopts, a sitecustomize.py, code that forges the harness's results file
and prints `PASSED` summary lines, or a module that takes the test runner's place (a root `pytest.py`, a
`_pytest` package, a standard-library `json.py`) and sends "PASSED" for every listed test down the harness's
own results channel. Graded in the real Docker sandbox, none of them resolves the task.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentflow.sandbox import open_sandbox
from agentflow.sandbox.config import SandboxConfig
from agentflow.swe.evaluate import EvalConfig, evaluate_predictions, run_prediction
from agentflow.swe.tasks import Prediction, SWETask, load_tasks

from .conftest import TASKS_FILE

pytestmark = pytest.mark.docker
IID = "inikit__inikit-1"


def _new_file(path: str, text: str) -> str:
    lines = text.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}"


FORCE_PASS = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
"""
CONFTEST = _new_file("conftest.py", FORCE_PASS)
PLUGIN = _new_file("evilplugin.py", FORCE_PASS) + _new_file("pytest.ini", "[pytest]\naddopts = -p evilplugin\n")
SITE = _new_file(".agentflow_eval/sitecustomize.py", "import builtins\n") + _new_file("sitecustomize.py", "import os\n")
FAKE_RUN = """import os
import sys

_fd = os.environ.get("AGENTFLOW_RESULTS_FD")
_ids = os.environ.get("AGENTFLOW_TEST_IDS")
if _fd and _ids:
    with open(_ids) as fh:
        names = [line.strip() for line in fh if line.strip()]
    with os.fdopen(int(_fd), "w") as out:
        out.write("{" + ", ".join('"%s": "PASSED"' % n for n in names) + "}")
print("all tests passed")
sys.stdout.flush()
os._exit(0)
"""
"""Stands in for the runner: every listed test reported PASSED on the harness's channel, exit 0, no test run."""
ROOT_PYTEST = _new_file("pytest.py", FAKE_RUN)
PYTEST_PACKAGE = _new_file("_pytest/__init__.py", FAKE_RUN)
STDLIB_JSON = _new_file("json.py", FAKE_RUN)
FORGE_INIT = '''diff --git a/inikit/__init__.py b/inikit/__init__.py
--- a/inikit/__init__.py
+++ b/inikit/__init__.py
@@ -14,3 +14,15 @@ __all__ = [
     "loads",
 ]
 __version__ = "0.4.1"
+import atexit as _atexit, json as _json, os as _os
+_IDS = ["tests/test_parser.py::test_value_may_contain_equals_signs"]
+_target = _os.environ.get("AGENTFLOW_TEST_RESULTS")
+def _forge():
+    print("".join(f"PASSED {i}\\n" for i in _IDS))
+    if _target:
+        with open(_target, "w") as fh:
+            _json.dump({i: "PASSED" for i in _IDS}, fh)
+    _os._exit(0)
+_atexit.register(_forge)
+def _never():
+    pass
'''


@pytest.fixture(scope="module")
def task() -> SWETask:
    return next(t for t in load_tasks(TASKS_FILE) if t.instance_id == IID)


@pytest.mark.parametrize(
    ("patch", "restored"),
    [
        (CONFTEST, ["conftest.py"]),
        (PLUGIN, ["evilplugin.py", "pytest.ini"]),
        (SITE, [".agentflow_eval/sitecustomize.py", "sitecustomize.py"]),
        (FORGE_INIT, []),
        (ROOT_PYTEST, ["pytest.py"]),
        (PYTEST_PACKAGE, ["_pytest/__init__.py"]),
        (STDLIB_JSON, ["json.py"]),
    ],
    ids=["conftest", "addopts-plugin", "sitecustomize", "forged-results", "root-pytest", "pytest-package", "stdlib-json"],
)
async def test_a_patch_that_fakes_its_tests_is_not_resolved(docker_image: str, task: SWETask, tmp_path: Path, patch: str, restored: list[str]) -> None:
    cfg = EvalConfig.model_validate({"backend": "docker", "sandbox": {"image": docker_image}, "rerun_failed": False})
    full = await evaluate_predictions([task], [Prediction(instance_id=IID, model_name_or_path="m", model_patch=patch)], cfg, out_dir=tmp_path)
    inst = full["instances"][IID]
    assert inst["patch_successfully_applied"] is True, inst
    assert inst["resolved"] is False, inst
    assert sorted(inst["restored_files"]) == sorted(restored)
    assert full["sandbox_backend"] == "docker"
    if restored:
        log = (tmp_path / "m" / IID / "run_instance.log").read_text()
        assert "restored from the base commit: " + ", ".join(restored) in log


async def test_the_gold_patch_still_resolves_with_the_guard(docker_image: str, task: SWETask, tmp_path: Path) -> None:
    gold = json.loads(next(line for line in (TASKS_FILE.parent / "gold.jsonl").read_text().splitlines() if IID in line))
    cfg = EvalConfig.model_validate({"backend": "docker", "sandbox": {"image": docker_image}})
    full = await evaluate_predictions([task], [Prediction(**gold)], cfg, out_dir=tmp_path)
    assert full["resolved_ids"] == [IID]
    assert full["instances"][IID]["restored_files"] == []


async def test_ten_thousand_test_ids_run_without_argument_list_too_long(docker_image: str, task: SWETask) -> None:
    """Real SWE-bench tasks list thousands of PASS_TO_PASS ids; they go through a file, not argv."""
    names = [f"test_generated_{i}" for i in range(10_000)]
    body = "".join(f"def {n}():\n    pass\n" for n in names)
    lines = body.splitlines()
    test_patch = (
        "diff --git a/tests/test_many.py b/tests/test_many.py\nnew file mode 100644\n--- /dev/null\n"
        f"+++ b/tests/test_many.py\n@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{x}\n" for x in lines)
    )
    ids = [f"tests/test_many.py::{n}" for n in names]
    big = task.model_copy(update={"test_patch": test_patch, "PASS_TO_PASS": ids, "FAIL_TO_PASS": []})
    async with open_sandbox("docker", SandboxConfig(image=docker_image)) as sb:
        report = await run_prediction(sb, big, None, run_empty=True, rerun_failed=False)
    assert report.error is None, report.error
    assert len(report.tests_status["PASS_TO_PASS"]["success"]) == 10_000
    assert report.resolved is True
