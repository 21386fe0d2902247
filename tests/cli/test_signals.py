"""SIGTERM to the CLI unwinds like Ctrl-C: a `local:` model's llama-server does not outlive the command."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_serve_flag import REPO, WORKFLOW, pid_alive
from tests.serving.conftest import require_llama

pytestmark = pytest.mark.llama


def test_sigterm_stops_a_local_models_server(tmp_path: Path) -> None:
    require_llama()
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentflow.cli.main", "run", WORKFLOW, "-o", str(tmp_path),
         "--model", "local:gemma3-270m", "--input", json.dumps({"pause": 60, "load_first": True})],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "AF_TEST_READY": str(ready)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not ready.exists():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the workflow never started"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)  # generous: CI machines can be loaded
    finally:
        if proc.poll() is None:
            proc.kill()
    match = re.search(r"\(pid (\d+)\)", err)
    assert match, err
    pid = int(match.group(1))
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_alive(pid), "the local model's server outlived SIGTERM"
    assert "Traceback" not in err
