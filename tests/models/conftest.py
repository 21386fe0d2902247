"""Fixtures: one real loopback HTTP server process (fake_llm_server.py) shared by the model tests."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SERVER = Path(__file__).with_name("fake_llm_server.py")
CASSETTES = Path(__file__).with_name("cassettes")


class FakeServer:
    def __init__(self, port: int) -> None:
        self.port = port
        self.root = f"http://127.0.0.1:{port}"
        self.openai_url = f"{self.root}/v1"

    def _post(self, path: str, obj: Any) -> Any:
        req = urllib.request.Request(
            self.root + path, data=json.dumps(obj).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())

    def script(self, *steps: dict[str, Any]) -> None:
        self._post("/_script", {"steps": list(steps)})

    def reset(self) -> None:
        self._post("/_reset", {})

    def log(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.root + "/_log", timeout=5) as resp:
            return json.loads(resp.read())

    def requests(self) -> list[dict[str, Any]]:
        return self.log()["requests"]

    def spec(self, model: str = "test-model") -> str:
        return f"openai-compatible:{self.openai_url}#{model}"


@contextlib.contextmanager
def fake_server_process() -> Iterator[FakeServer]:
    """fake_llm_server.py as a real process on 127.0.0.1, stopped on exit (other test packages use it too)."""
    proc = subprocess.Popen([sys.executable, str(SERVER)], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("PORT "):
            raise RuntimeError(f"fake server did not start: {line!r}")
        yield FakeServer(int(line.split()[1]))
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def _server_process() -> Iterator[FakeServer]:
    with fake_server_process() as server:
        yield server


@pytest.fixture
def server(_server_process: FakeServer) -> FakeServer:
    _server_process.reset()
    return _server_process


@pytest.fixture
def fast() -> dict[str, Any]:
    """Options that keep retry waits short in tests."""
    return {"retry_initial_s": 0.01, "retry_max_wait_s": 2.0, "timeout_s": 10}
