"""Ctrl-C on `agentflow run` and `agentflow repair` exits 130 with the exact command that continues the run, and
that command does continue it; without a TTY, `run` names its thread on its first line, before any node runs."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.swe_fixtures import TASKS_FILE, docker_image, read_jsonl

ROOT = Path(__file__).resolve().parents[2]
CRASH = ROOT / "tests" / "graph" / "crash.yaml"
CASSETTE = ROOT / "tests" / "repair" / "cassettes" / "bench" / "inikit__inikit-1.json"
__all__ = ["docker_image"]


def _cli(argv: list[str], env_extra: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`agentflow ARGV` with pipes (no TTY)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env_extra or {})}
    return subprocess.Popen([sys.executable, "-m", "agentflow.cli.main", *argv], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _ctrl_c_when(proc: subprocess.Popen[str], ready: Callable[[], bool]) -> str:
    """SIGINT (what Ctrl-C sends) once `ready()` holds; the command's stderr after it ended with 130."""
    deadline = time.monotonic() + 240
    while not ready():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the command never reached the point to interrupt"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    return err


def _continue_command(err: str) -> list[str]:
    (line,) = [line for line in err.splitlines() if line.startswith("agentflow: interrupted; ")]
    command = shlex.split(line.split("; continue it with: ", 1)[1])
    assert command[0] == "agentflow"
    return command[1:]


def test_ctrl_c_on_run_names_the_thread_first_and_the_resume_command(tmp_path: Path) -> None:
    effects, runs = tmp_path / "effects.txt", tmp_path / "runs"
    proc = _cli(["run", str(CRASH), "-o", str(runs), "--input", json.dumps({"effects": str(effects), "rounds": 3})],
                {"AF_TEST_PAUSE_AT": "1"})
    assert proc.stderr is not None
    first = proc.stderr.readline()  # printed at the start, not at the end: the run is still going
    assert proc.poll() is None and first.startswith("run crash-") and " · thread crash-" in first, first
    run_id, thread = first.split()[1], first.split(" · thread ", 1)[1].split(" · ", 1)[0]
    err = _ctrl_c_when(proc, Path(f"{effects}.ready").exists)
    argv = _continue_command(err)
    assert argv == ["run", "-o", str(runs), "--resume", thread]
    assert f"run {run_id} (thread {thread}) is kept in {runs / run_id}" in err
    resumed = _cli([*argv, "--json"])
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1])["status"] == "done"
    assert effects.read_text().splitlines() == ["round 0", "round 1", "round 2"]  # the cut round's effect once


@pytest.mark.docker
def test_ctrl_c_on_repair_prints_the_command_that_continues_it(docker_image: str, tmp_path: Path) -> None:
    spectrum = "inikit__inikit-1/spectrum"

    def nodes(events: Path, kind: str) -> list[str]:
        return [e["node_id"] for e in read_jsonl(events) if e["kind"] == kind] if events.is_file() else []

    # The signal must land inside the spectrum (seconds of traced tests, before any model call, so the replayed
    # model's sequence starts where the continued run asks). On a loaded machine the spectrum can end between
    # seeing it start and the signal's delivery: that attempt tested nothing, and a new one starts.
    for attempt in range(3):
        out = tmp_path / f"repair-{attempt}"
        events = out / "events.jsonl"
        proc = _cli(["repair", "--tasks", str(TASKS_FILE), "-i", "inikit__inikit-1", "--model", f"replay:{CASSETTE}",
                     "--sandbox", "docker", "-c", f"sandbox.image={docker_image}", "-c", "tests.feedback=task", "-c", "mutants=false",
                     "-c", "edit.format=search_replace", "-o", str(out)])

        def spectrum_started(events: Path = events) -> bool:
            return spectrum in nodes(events, "node.start")

        err = _ctrl_c_when(proc, spectrum_started)
        if spectrum not in nodes(events, "node.end"):
            break
    else:
        pytest.fail("in 3 attempts the spectrum ended before the interrupt reached it")
    assert f"the repair is kept in {out}" in err
    assert "done:" not in err and "interrupted: the task did not finish" in err, err  # not `done: no_patch`
    argv = _continue_command(err)
    assert argv[0] == "repair" and argv[-2:] == ["-o", str(out)] and argv.count("-o") == 1
    again = _cli(argv)
    stdout, err = again.communicate(timeout=300)
    assert again.returncode == 0, stdout + err
    assert "resolved: True" in stdout
    kinds = [(e["kind"], e["node_id"]) for e in read_jsonl(events)]
    assert ("repair.resume", "inikit__inikit-1") in kinds
    assert kinds.count(("node.start", "inikit__inikit-1/baseline")) == 1  # the finished node did not run again
    assert kinds.count(("node.start", "inikit__inikit-1/spectrum")) == 2  # the one cut short did


@pytest.mark.docker
def test_ctrl_c_on_bench_prints_the_command_that_continues_it(docker_image: str, tmp_path: Path) -> None:
    out = tmp_path / "bench"
    events = out / "events.jsonl"
    proc = _cli(["bench", str(TASKS_FILE), "-i", "inikit__inikit-1", "--model", f"replay:{CASSETTE}",
                 "--sandbox", "docker", "-c", f"sandbox.image={docker_image}", "-c", "tests.feedback=task", "-c", "mutants=false",
                 "-c", "edit.format=search_replace", "-o", str(out)])

    def started() -> bool:
        return events.is_file() and any(e["kind"] == "node.start" for e in read_jsonl(events))

    err = _ctrl_c_when(proc, started)
    assert f"the batch is kept in {out}" in err
    argv = _continue_command(err)
    assert argv[0] == "bench" and "--resume" in argv and argv[-2:] == ["-o", str(out)] and argv.count("-o") == 1
    again = _cli(argv)
    stdout, err = again.communicate(timeout=300)
    assert again.returncode == 0, stdout + err
    assert "1/1 done" in stdout, stdout + err
