"""What `agentflow run` prints at the end says how each node of a step cut short ended (issue #53, item 5):
six agents at once under `--step-limit 3` (the test model) make 3 calls; the result (`--json`) names the 3
the budget refused under `errors` and the 3 that finished under `finished`, its usage counts 3 calls, and
the text output says the same on stderr; a resume with a raised limit runs only the refused ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentflow.cli.main import run

FAN_OUT = str(Path(__file__).with_name("fan_out.yaml"))
AGENTS = {f"a{i}" for i in range(6)}


def _last(out: str) -> dict[str, Any]:
    return json.loads(out.strip().splitlines()[-1])


def test_a_budget_cut_step_reports_who_finished_and_who_was_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = str(tmp_path / "runs")
    base = ["-o", runs, "-m", "test", "--step-limit", "3"]
    assert run(["run", FAN_OUT, *base, "--thread-id", "t", "-i", '{"task": "x"}', "--json"]) == 1
    result = _last(capsys.readouterr().out)
    assert (result["status"], result["stop_reason"]) == ("failed", "budget:model_calls")
    refused, finished = set(result["errors"]), set(result["finished"])
    assert len(refused) == 3 and len(finished) == 3 and refused | finished == AGENTS
    assert all(result["errors"][n]["reason"] == "budget:model_calls" for n in refused)
    assert all(result["state"][n] for n in finished) and not any(result["state"].get(n) for n in refused)
    assert result["usage"]["model_calls"] == 3

    assert run(["run", FAN_OUT, *base, "--thread-id", "u", "-i", '{"task": "x"}']) == 1
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if line.startswith("agentflow: in that step")]
    said_failed = line.split("failed: ", 1)[1].split(";", 1)[0]
    said_finished = line.split("finished: ", 1)[1].split(" (", 1)[0]
    assert sorted(said_failed.split(", ")) == sorted(f"{n} (budget:model_calls)" for n in AGENTS - set(
        said_finished.split(", ")))
    assert len(said_finished.split(", ")) == 3

    assert run(["run", "-o", runs, "--resume", "t", "--step-limit", "6", "--json"]) == 0
    resumed = _last(capsys.readouterr().out)
    assert resumed["status"] == "done" and resumed["finished"] == [] and all(resumed["state"][n] for n in AGENTS)
    assert resumed["usage"]["model_calls"] == 6  # the 3 refused ran; the 3 that finished did not run again
