"""kill -9 in the middle of a run, then `agentflow run --resume`: same final state as an uninterrupted run,
and the side-effecting tool ran exactly once per round."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = str(Path(__file__).with_name("crash.yaml"))


def agentflow(args: list[str], env_extra: dict[str, str] | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env_extra or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "agentflow.cli.main", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def final_result(proc: subprocess.Popen[str]) -> dict:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def comparable(state: dict) -> dict:
    return {k: v for k, v in state.items() if k != "effects"}


def test_kill_9_then_resume_matches_uninterrupted_run(tmp_path: Path) -> None:
    rounds = 5
    reference_effects = tmp_path / "reference.txt"
    reference = final_result(
        agentflow(
            [
                "run",
                WORKFLOW,
                "--json",
                "-o",
                str(tmp_path / "ref-runs"),
                "--input",
                json.dumps({"effects": str(reference_effects), "rounds": rounds}),
            ]
        )
    )
    assert reference["status"] == "done"

    effects = tmp_path / "effects.txt"
    runs = tmp_path / "runs"
    proc = agentflow(
        [
            "run",
            WORKFLOW,
            "--json",
            "-o",
            str(runs),
            "--thread-id",
            "crashy",
            "--input",
            json.dumps({"effects": str(effects), "rounds": rounds}),
        ],
        {"AF_TEST_PAUSE_AT": "2"},
    )
    ready = Path(str(effects) + ".ready")
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "the run never reached the pause point"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert effects.read_text().splitlines() == ["round 0", "round 1", "round 2"]

    resumed = final_result(agentflow(["run", WORKFLOW, "--json", "-o", str(runs), "--resume", "crashy"]))
    assert resumed["status"] == "done"
    assert comparable(resumed["state"]) == comparable(reference["state"])
    assert effects.read_text().splitlines() == [f"round {i}" for i in range(rounds)]  # none twice
    assert reference_effects.read_text().splitlines() == [f"round {i}" for i in range(rounds)]
    events = [
        json.loads(line) for line in (runs / resumed["run_id"] / "events.jsonl").read_text().splitlines()
    ]
    replayed = [
        e["data"]["args"]["label"] for e in events if e["kind"] == "tool.call" and e["data"].get("replayed")
    ]
    assert replayed == ["round 2"]  # the interrupted round's call came from the journal
