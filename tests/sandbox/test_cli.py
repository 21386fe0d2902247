"""`agentflow sandbox ...`: bad input gives one line and exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from agentflow.cli.main import run


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentflow.cli.main", *args],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_bad_limit_in_config_is_one_line(capsys):
    assert run(["sandbox", "exec", "true", "--sandbox", "local", "-c", "memory_mb=-5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "memory_mb" in err


def test_docker_not_running_is_one_line():
    proc = _cli(
        "sandbox", "exec", "true", "--sandbox", "docker", env={"DOCKER_HOST": "unix:///nonexistent.sock"}
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Docker" in lines[0] and "--sandbox local" in lines[0]


@pytest.mark.docker
def test_missing_image_is_one_line(sandbox_image):
    proc = _cli("sandbox", "exec", "true", "--sandbox", "docker", "-c", "image=agentflow-sandbox:nope")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "agentflow sandbox build" in lines[0]


def test_exec_local_passes_exit_code_through():
    proc = _cli("sandbox", "exec", "echo hi; exit 3", "--sandbox", "local")
    assert proc.returncode == 3 and proc.stdout == "hi\n"
    proc = _cli("sandbox", "exec", "no-such-cmd", "--sandbox", "local")
    assert proc.returncode == 127 and "command not found" in proc.stdout


def test_import_agentflow_sandbox_does_not_import_docker():
    code = "import agentflow.sandbox, sys; print('docker' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
