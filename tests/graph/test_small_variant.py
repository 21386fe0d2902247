"""The shipped small-model variant `plan_code_search_small` as a user runs it (`agentflow run ... --workspace
REPO --apply`), with a scripted model in place of the 1.5B one (docs/measurements/small-model.md has the
real model's run): it plans, the file the plan names goes into the coder's prompt, two attempts each answer with the
corrected function and a step puts it in place in their own sandboxes, the tests pass, the critic accepts, --apply brings the one-line fix back. While a model call runs, `agentflow run` prints a
progress line every `PROGRESS_EVERY_S` (set below the scripted call's length here), so a slow call is never
a silent one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentflow.cli.main import run
from agentflow.graph.run import streaming

CALC = "def mul(a, b):\n    return a * b\n\n\ndef add(a, b):\n    return a + b\n"
"""calc.py fixed; the repository's has add() subtracting."""

MODEL = f"function:{Path(__file__).with_name('small_model.py')}:reply"


def _repo(root: Path) -> Path:
    root.mkdir()
    (root / "calc.py").write_text(CALC.replace("a + b", "a - b", 1))
    (root / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def test_the_small_variant_fixes_a_function_and_reports_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # pytest there
    monkeypatch.setattr(streaming, "PROGRESS_EVERY_S", 0.2)
    repo = _repo(tmp_path / "repo")
    code = run(["run", "plan_code_search_small", "--workspace", str(repo), "--sandbox", "local", "-m", MODEL,
                "-o", str(tmp_path / "runs"), "--apply", "-i", '{"task": "add() in calc.py subtracts; make it add"}'])
    err = capsys.readouterr().err
    assert code == 0, err
    assert (repo / "calc.py").read_text() == CALC
    # every node's model calls (the planner, both attempts' coder, the critic) said they were still running
    progress = re.findall(r"(\S+): model call (\d+) running for \d+s \((\d+) tokens so far\)", err)
    assert {where for where, _, _ in progress} >= {"plan", "attempt/b0/code", "attempt/b1/code", "critique"}, err
    # each attempt's first answer gave the code back unchanged; told so, its second try fixed it
    for branch in ("b0", "b1"):
        assert len(re.findall(rf"attempt/{branch}/code: model call 1 took", err)) == 2, err
    assert "/code: tool" not in err, err  # the plan's file was in the coder's prompt, the step made the edit: no tool call
    assert "branch b0 end value 1.00" in err and "branch b1 end value 1.00" in err, err  # both attempts' tests pass
