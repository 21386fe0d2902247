"""A test run that did not run is not "0 passed, 0 failed": when pytest cannot run in the sandbox (missing, a
command not found, no tests collected, any exit without a per-test outcome), `check_work` fails its node with
reason `tests_not_run` and the run ends `failed` saying why; tests that ran report their outcomes as before.
Real local sandbox, real pytest (a workspace's own `pytest.py` stands in for a broken or missing one)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from agentflow.cli.main import run

CHECK = {"name": "check", "tools": ["tests"],
         "state": {"diff": {"type": "str"}, "tests": {"type": "dict"}},
         "nodes": {"check": {"fn": "agentflow.workflows.demo:check_work", "next": "END"}}}

PASSING = "def test_ok():\n    assert True\n"

NOT_RUN = {
    "no tests": {"calc.py": "x = 1\n"},
    "pytest missing": {"pytest.py": "import sys\nsys.exit('No module named pytest')\n"},
    "command not found": {"pytest.py": "import sys\nsys.stderr.write('pytest: not found\\n')\nsys.exit(127)\n"},
    "usage error": {"pytest.py": "import sys\nsys.exit(4)\n", "test_a.py": PASSING},
    "silent success": {"pytest.py": "", "test_a.py": PASSING},
}


@pytest.fixture(autouse=True)
def _python_with_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sandbox's `python3` is this one, which has pytest (a case takes it away with its own pytest.py)."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


def _run(tmp_path: Path, files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, str]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for name, text in files.items():
        (workspace / name).write_text(text)
    workflow = tmp_path / "check.yaml"
    workflow.write_text(yaml.safe_dump(CHECK))
    code = run(["run", str(workflow), "--sandbox", "local", "--workspace", str(workspace), "-o",
                str(tmp_path / "runs"), "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out.strip().splitlines()[-1]), captured.err


@pytest.mark.parametrize("case", sorted(NOT_RUN))
def test_tests_that_did_not_run_fail_the_run(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, result, err = _run(tmp_path, NOT_RUN[case], capsys)
    assert (code, result["status"], result["stop_reason"]) == (1, "failed", "tests_not_run"), (result, err)
    assert "the tests did not run" in result["errors"]["check"]["error"]
    assert "tests_not_run" in err


@pytest.mark.parametrize("test, ok", [(PASSING, True), ("def test_bad():\n    assert False\n", False)])
def test_tests_that_ran_report_their_outcomes(
    test: str, ok: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, result, err = _run(tmp_path, {"test_a.py": test}, capsys)
    assert (code, result["status"]) == (0, "done"), err
    tests = result["state"]["tests"]
    assert tests["ok"] is ok and tests["summary"].startswith("1 passed" if ok else "0 passed, 1 failed"), tests
