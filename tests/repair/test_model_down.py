"""A model server that does not answer is an infrastructure failure of the task, not a crash of the batch."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from agentflow.cli.main import run

from .conftest import TASKS_FILE


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens there


def test_unreachable_model_is_env_error_and_resume_retries_it(tmp_path: Path):
    out = tmp_path / "run"
    argv = ["bench", str(TASKS_FILE), "-i", "inikit__inikit-1", "--sandbox", "local", "-o", str(out),
            "--model", f"openai-compatible:http://127.0.0.1:{closed_port()}/v1#nothing",
            "-c", "model_options.max_attempts=1", "-c", "model_options.timeout_s=5", "-c", "tests.feedback=task", "-c", "mutants=false"]
    run(argv)
    outcome = json.loads((out / "instances" / "inikit__inikit-1" / "outcome.json").read_text())
    assert outcome["status"] == "env_error" and "unreachable" in outcome["error"].lower()
    report = json.loads((out / "report.json").read_text())
    assert report["statuses"] == {"env_error": 1}
    run([*argv, "--resume"])  # an infrastructure failure is retried, not kept
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert sum(1 for e in events if e["kind"] == "repair.start") == 2
