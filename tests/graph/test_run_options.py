"""`agentflow run` options that outlive one process: a resume reuses the recorded workflow and model, the
run's spend is checkpointed and still counts after --resume, a USD limit that cannot trip is a warning, and
user code next to the workflow file imports without PYTHONPATH."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentflow.cli.main import run

HERE = Path(__file__).parent
WORKFLOW = str(HERE / "agent_approval.yaml")
CRITIQUE = json.dumps({"issues": [], "summary": "fine"})


def _cassette(path: Path, n: int) -> Path:
    reply = {"response": {"choices": [{"message": {"role": "assistant", "content": CRITIQUE}, "finish_reason": "stop"}],
                          "usage": {"input_tokens": 30, "output_tokens": 10}}}
    path.write_text(json.dumps({"version": 1, "match": "sequence", "interactions": [reply] * n}))
    return path


def _last(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_resume_reuses_the_recorded_workflow_and_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cassette = _cassette(tmp_path / "c.json", 2)
    runs = str(tmp_path / "runs")
    assert run(["run", WORKFLOW, "-m", f"replay:{cassette}", "-o", runs, "--thread-id", "r1",
                "-i", '{"task": "t"}']) == 0
    out = capsys.readouterr().err
    hint = next(line for line in out.splitlines() if line.startswith("continue with:"))
    command = hint.removeprefix("continue with: agentflow ").split(" (or")[0].split()
    assert "-m" not in command and "--resume" in command
    assert run([*command, "--json"]) == 0  # the hint, as printed
    done = _last(capsys.readouterr().out)
    assert done["status"] == "done" and done["state"]["second"]["summary"] == "fine"
    assert done["usage"]["model_calls"] == 2  # the first leg's call is carried over


def test_budget_survives_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--step-limit 1 counts the whole run: the first leg spends it, so the resumed second agent cannot run."""
    cassette = _cassette(tmp_path / "c.json", 2)
    runs = str(tmp_path / "runs")
    assert run(["run", WORKFLOW, "-m", f"replay:{cassette}", "-o", runs, "--thread-id", "b1", "--step-limit", "1",
                "-i", '{"task": "t"}']) == 0
    capsys.readouterr()
    rdir = next((tmp_path / "runs").iterdir())
    assert json.loads((rdir / "usage.json").read_text())["model_calls"] == 1
    assert run(["run", "-o", runs, "--resume", "b1", "--approve", "--json"]) == 1
    result = _last(capsys.readouterr().out)
    assert result["status"] == "failed" and result["stop_reason"] == "budget:model_calls"
    assert result["errors"]["second"]["node"] == "second"
    assert json.loads((rdir / "usage.json").read_text())["model_calls"] == 1


def test_usd_limit_on_an_unpriced_model_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cassette = _cassette(tmp_path / "c.json", 1)
    code = run(["run", WORKFLOW, "-m", f"replay:{cassette}", "-o", str(tmp_path / "runs"), "--budget-usd", "0.5",
                "-i", '{"task": "t"}'])
    assert code == 0
    assert "cannot trip" in capsys.readouterr().err


def test_fn_and_tools_next_to_the_workflow_import(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "wf"
    folder.mkdir()
    (folder / "gates.py").write_text("def mark(state):\n    return {'out': state['x'] * 2}\n")
    (folder / "helpers").mkdir()
    (folder / "helpers" / "steps.py").write_text("def finish(state):\n    return {'done': True}\n")
    (folder / "mytools.py").write_text(
        "from agentflow.tools import tool\n\n@tool\ndef shout(text: str) -> str:\n"
        "    '''Upper-case text.\n\n    Args:\n        text: what to shout.\n    '''\n    return text.upper()\n"
    )
    (folder / "flow.yaml").write_text(
        "name: flow\nstate: {x: {type: int}, out: {type: int}, done: {type: bool}, loud: {type: str}}\n"
        "tools: [mytools]\n"
        "nodes:\n  a: {fn: 'gates:mark', next: b}\n  b: {fn: 'helpers/steps.py:finish', next: c}\n"
        "  c: {tool: shout, args: {text: hi}, output: loud, next: END}\n"
    )
    monkeypatch.chdir(tmp_path)  # elsewhere: the workflow's folder is not on sys.path
    assert run(["run", str(folder / "flow.yaml"), "-o", str(tmp_path / "runs"), "--json", "-i", '{"x": 4}']) == 0
    state = _last(capsys.readouterr().out)["state"]
    assert state["out"] == 8 and state["done"] is True and state["loud"] == "HI"


def test_tools_flag_finds_a_module_in_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    (tmp_path / "mytools_cwd.py").write_text(
        "from agentflow.tools import tool\n\n@tool\ndef whisper(text: str) -> str:\n"
        "    '''Lower-case text.\n\n    Args:\n        text: what to whisper.\n    '''\n    return text.lower()\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    assert run(["tools", "list", "-t", "mytools_cwd"]) == 0
    assert "whisper" in capsys.readouterr().out
