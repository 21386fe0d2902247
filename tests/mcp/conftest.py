"""Helpers of the MCP tests: the fixture server's command, a one-agent workflow using it, scripted cassettes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

HERE = Path(__file__).parent
REPO = HERE.parents[1]
FIXTURE = HERE / "fixture_server.py"
STDIO_COMMAND = [sys.executable, str(FIXTURE)]


def tool_step(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    message = {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}
    return {"response": {"choices": [{"message": message, "finish_reason": "tool_calls"}], "usage": {"input_tokens": 20, "output_tokens": 5}}}


def final_step(text: str) -> dict[str, Any]:
    message = {"role": "assistant", "content": text}
    return {"response": {"choices": [{"message": message, "finish_reason": "stop"}], "usage": {"input_tokens": 20, "output_tokens": 5}}}


def write_cassette(path: Path, steps: list[dict[str, Any]]) -> Path:
    """A hand-scripted cassette served in order (match: sequence)."""
    path.write_text(json.dumps({"version": 1, "match": "sequence", "interactions": steps}, indent=1))
    return path


def write_workflow(path: Path, server: dict[str, Any]) -> Path:
    """A workflow with one agent node (no packs) whose tools are the fixture server's, prefixed `fx_`."""
    spec = {
        "name": "mcp_agent",
        "state": {"task": {"type": "str"}, "answer": {"type": "any"}},
        "mcp_servers": {"fixture": {"prefix": "fx_", "block": ["fail"], **server}},
        "nodes": {
            "helper": {
                "agent": str(HERE / "helper_agent.yaml"),
                "args": {"input": "task", "mcp_servers": ["fixture"]},
                "output": "answer",
                "next": "END",
            }
        },
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def stdio_server_entry() -> dict[str, Any]:
    return {
        "command": STDIO_COMMAND,
        "pass_env": ["FIXTURE_RECORD_FILE", "FIXTURE_PID_FILE", "FIXTURE_STALL_SCALE"],
    }


def wait_for_line(path: Path, line: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and line in path.read_text().splitlines()):
        assert time.monotonic() < deadline, f"{path} never got the line {line!r}"
        time.sleep(0.05)


def serve_args(workspace: Path, runs: Path, *extra: str) -> list[str]:
    """`python ARGS` runs `agentflow mcp serve WORKSPACE --runs RUNS EXTRA...`."""
    return ["-m", "agentflow.cli.main", "mcp", "serve", str(workspace), "--runs", str(runs), *extra]


def text(result: Any) -> str:
    """The text blocks of a tool result, joined."""
    return "\n".join(block.text for block in result.content)


def start_http(workspace: Path, runs: Path, token_file: Path, port: int, *extra: str,
               env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`agentflow mcp serve --http` on 127.0.0.1:PORT (extra options and environment added); returns once it
    answers."""
    proc = subprocess.Popen(
        [sys.executable, *serve_args(workspace, runs, "--http", "--port", str(port), "--token-file", str(token_file),
                                     *extra)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 120
    while True:
        assert proc.poll() is None, proc.communicate()[1]
        if token_file.exists():
            try:
                httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=1)
                return proc
            except httpx.TransportError:
                pass
        assert time.monotonic() < deadline, "the server never listened"
        time.sleep(0.2)


class HttpFixture:
    """The fixture server as a streamable-HTTP process on 127.0.0.1 (start, kill -9, start again)."""

    def __init__(self, env: dict[str, str]) -> None:
        from agentflow.serving.ports import pick_free_port

        self.port = pick_free_port()
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [*STDIO_COMMAND, "--http", str(self.port)],
            env={**os.environ, **self.env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            assert self.proc.poll() is None, "the HTTP fixture server exited"
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/", timeout=1)
                return
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the HTTP fixture server never listened"
                time.sleep(0.1)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)


@pytest.fixture
def http_fixture(tmp_path: Path) -> Iterator[HttpFixture]:
    server = HttpFixture({"FIXTURE_RECORD_FILE": str(tmp_path / "http-record.txt")})
    server.start()
    yield server
    server.kill()


@pytest.fixture(scope="session")
def sandbox_image() -> str:
    """The offline sandbox image (built once if missing); skips when Docker is not running."""
    from agentflow.errors import UserError
    from agentflow.sandbox.docker import docker_client

    try:
        docker_client()
    except UserError as exc:
        pytest.skip(f"Docker is not available: {exc}")
    from agentflow.sandbox.image import ensure_image

    return ensure_image()
