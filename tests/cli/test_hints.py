"""Every command `agentflow run` prints for the user to run next can succeed when run as printed: after a run
stopped on one of its run-wide limits, the printed `--resume` command raises that limit (every leg's spend
counts against it), and that command, parsed from stderr, finishes the run."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from agentflow.cli.main import run

NAPS = {"name": "naps", "state": {"nap": {"type": "float"}, "naps": {"type": "int"}},
        "nodes": {"first": {"fn": "tests.cli.nodes:nap", "next": "second"},
                  "second": {"fn": "tests.cli.nodes:nap", "next": "END"}}}


def _retry_command(err: str) -> list[str]:
    (line,) = [line for line in err.splitlines() if "retry the node with: " in line]
    command = shlex.split(line.split("retry the node with: ", 1)[1].removesuffix(")"))
    assert command[0] == "agentflow"
    return command[1:]


def test_the_resume_command_printed_after_a_wall_time_stop_finishes_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workflow = tmp_path / "naps.yaml"
    workflow.write_text(yaml.safe_dump(NAPS))
    runs = tmp_path / "runs"
    code = run(["run", str(workflow), "-o", str(runs), "--wall-time", "2s", "--json", "-i", '{"nap": 1.2}'])
    captured = capsys.readouterr()
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert (code, result["status"], result["stop_reason"]) == (1, "failed", "budget:wall_seconds"), captured.err
    again = _retry_command(captured.err)
    assert again[again.index("--resume") + 1] == result["thread_id"]
    assert "--wall-time" in again, again  # the limit that stopped it, raised
    code = run([*again, "--json"])
    captured = capsys.readouterr()
    resumed = json.loads(captured.out.strip().splitlines()[-1])
    assert (code, resumed["status"], resumed["state"]["naps"]) == (0, "done", 2), captured.err


@pytest.mark.parametrize("outcome", ["done", "failed", "paused"])
def test_text_mode_stdout_holds_the_result_alone(
    outcome: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`run ... > state.json`: stdout is one JSON document (the state), whatever the run's outcome; the run
    line, the progress lines and the hints are on stderr."""
    spec = {**NAPS, **({"interrupt_before": ["second"]} if outcome == "paused" else {})}
    workflow = tmp_path / "naps.yaml"
    workflow.write_text(yaml.safe_dump(spec))
    nap = 0.0 if outcome != "failed" else 5.0
    limit = ["--wall-time", "1s"] if outcome == "failed" else []
    code = run(["run", str(workflow), "-o", str(tmp_path / "runs"), *limit, "-i", json.dumps({"nap": nap})])
    captured = capsys.readouterr()
    assert code == (1 if outcome == "failed" else 0), captured.err
    state = json.loads(captured.out)  # the whole of stdout
    assert state["nap"] == nap
    assert "· thread naps-" in captured.err and "first: started" in captured.err


AGENT = {"name": "ask", "state": {"task": {"type": "str"}, "answer": {"type": "dict"}},
         "nodes": {"a": {"agent": "critic", "output": "answer", "next": "END",
                         "args": {"input": {"task": "task", "summary": "task"}, "config": {"tools": []}}}}}


def _missing_workspace(tmp: Path) -> list[str]:
    return ["-m", "test:echo", "--workspace", str(tmp / "nope")]


def _file_workspace(tmp: Path) -> list[str]:
    (tmp / "a-file").write_text("x")
    return ["-m", "test:echo", "--workspace", str(tmp / "a-file")]


def _dangling_workspace(tmp: Path) -> list[str]:
    (tmp / "link").symlink_to(tmp / "gone")
    return ["-m", "test:echo", "--workspace", str(tmp / "link")]


def _unreadable_cassette(tmp: Path) -> list[str]:
    (tmp / "bad.json").write_text("{not json")
    return ["-m", f"replay:{tmp / 'bad.json'}"]


@pytest.mark.parametrize("flags, needle", [
    (lambda tmp: ["-m", "openai:gpt-4o-mini"], "OPENAI_API_KEY"),
    (lambda tmp: ["-m", "anthropic:claude-3-5-haiku-latest"], "ANTHROPIC_API_KEY"),
    (lambda tmp: ["--model", "openai:gpt-4o-mini", "--sandbox", "none"], "OPENAI_API_KEY"),
    (_missing_workspace, "is not a directory"),
    (_file_workspace, "is not a directory"),
    (_dangling_workspace, "is not a directory"),
    (lambda tmp: ["-m", f"replay:{tmp / 'none.json'}"], "none.json"),
    (_unreadable_cassette, "invalid JSON"),
], ids=["openai-key", "anthropic-key", "openai-key-no-sandbox", "missing-workspace", "file-workspace",
        "dangling-workspace", "missing-cassette", "unreadable-cassette"])
def test_a_run_that_cannot_start_makes_no_run_folder(
    flags: object, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for env in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(env, raising=False)
    workflow = tmp_path / "ask.yaml"
    workflow.write_text(yaml.safe_dump(AGENT))
    runs = tmp_path / "runs"
    runs.mkdir()
    code = run(["run", str(workflow), "-o", str(runs), *flags(tmp_path), "-i", '{"task": "x"}'])  # type: ignore[operator]
    err = capsys.readouterr().err
    assert code == 2 and needle in err and "Traceback" not in err, err
    assert list(runs.iterdir()) == []  # no half-made run folder
