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
