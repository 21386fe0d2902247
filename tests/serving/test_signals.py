"""A library user's llama-server stops when the user's process gets SIGTERM (not only under the CLI), and
when it is killed with -9 (the kernel's parent-death signal)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentflow._process import pid_alive
from tests.serving.conftest import require_llama

ROOT = Path(__file__).resolve().parents[2]

APP = textwrap.dedent(
    """
    import signal, sys, time
    from tests.serving.conftest import start_small
    seen = []
    if sys.argv[1] == "own-handler":  # an app with its own SIGTERM handler keeps it
        signal.signal(signal.SIGTERM, lambda *a: (seen.append(1), print("app handler ran", flush=True), sys.exit(3)))
    handle = start_small()
    print(handle.process.pid, flush=True)
    time.sleep(300)
    """
)

# the server is started from a worker thread that ends with its event loop (asyncio.run shuts the executor
# down): the parent-death signal must follow the process, not that thread
THREADED_APP = textwrap.dedent(
    """
    import asyncio, time
    from agentflow.serving.llamacpp import LlamaServerOptions, llamacpp_launch
    from agentflow.serving.server import ServerHandle
    opts = LlamaServerOptions.model_validate({"model": "gemma3-270m", "parallel": 1, "ctx": 512})
    handle = asyncio.run(ServerHandle(llamacpp_launch(opts, say=lambda m: None), port=opts.port).start())
    print(handle.process.pid, flush=True)
    time.sleep(300)
    """
)


def _server_pid_after_sigterm(mode: str) -> tuple[int, subprocess.CompletedProcess[str] | None, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", APP, mode], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip().isdigit(), proc.stderr.read() if proc.stderr else line
        server = int(line)
        assert pid_alive(server)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        return server, None, out
    finally:
        if proc.poll() is None:
            proc.kill()


def _gone(pid: int, within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not pid_alive(pid) or _zombie(pid):  # a zombie has ended; its new parent has yet to reap it
            return True
        time.sleep(0.1)
    return False


@pytest.mark.llama
def test_sigterm_stops_an_embedded_llama_server() -> None:
    require_llama()
    server, _, _ = _server_pid_after_sigterm("default")
    try:
        assert _gone(server), "llama-server outlived its owner after SIGTERM"
    finally:
        if pid_alive(server):
            os.kill(server, signal.SIGKILL)


@pytest.mark.llama
def test_sigterm_keeps_the_apps_own_handler() -> None:
    require_llama()
    server, _, out = _server_pid_after_sigterm("own-handler")
    try:
        assert _gone(server)
        assert "app handler ran" in out
    finally:
        if pid_alive(server):
            os.kill(server, signal.SIGKILL)


@pytest.mark.llama
def test_kill_9_of_the_owner_ends_its_llama_server() -> None:
    require_llama()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", THREADED_APP], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    server = 0
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip().isdigit(), proc.stderr.read() if proc.stderr else line
        server = int(line)
        time.sleep(1.0)  # the thread that started it has ended by now
        assert not _zombie(server) and _parent_of(server) == proc.pid, "the server died with the starting thread"
        proc.kill()  # SIGKILL: no clean-up code runs in the owner
        proc.wait(timeout=10)
        assert _gone(server, within=5.0), "llama-server outlived its owner's kill -9 by 5 s"
    finally:
        if proc.poll() is None:
            proc.kill()
        if server and pid_alive(server):
            os.kill(server, signal.SIGKILL)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
