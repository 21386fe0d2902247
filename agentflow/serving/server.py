"""`ServerHandle`: one managed OpenAI-compatible server (llama-server or vLLM) on 127.0.0.1.

Start-up: generate an API key (registered as a secret), pick a free port, spawn the server in its own
process group, then poll `/health` until it answers 200 — streaming new log lines to `on_log` meanwhile.
If the process exits first, the error names its exit code and last log lines; a bind failure on an
automatically chosen port is retried with a fresh port. `stop()` kills the whole process group.

All process work is synchronous (it is short and uses blocking calls); the async methods run it in a thread.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import httpx

from agentflow.config import cache_dir
from agentflow.errors import ModelError, UserError
from agentflow.secrets import redact, register_secret
from agentflow.serving.metrics import summarize
from agentflow.serving.ports import BIND_FAILURE, pick_free_port, port_is_free
from agentflow.serving.process import ManagedProcess, reap_orphans
from agentflow.serving.profiles import ModelProfile, default_profile

HOST = "127.0.0.1"
LogCallback = Callable[[str], None]


class ServerError(ModelError):
    """A managed server failed to start or died; `log_tail` holds its last log lines (redacted)."""

    def __init__(self, message: str, log_tail: list[str] | None = None) -> None:
        self.log_tail = log_tail or []
        detail = ("; last log lines:\n  " + "\n  ".join(self.log_tail)) if self.log_tail else ""
        super().__init__(message + detail)
        self.summary = message


class ServerStartError(ServerError):
    """The server exited or stayed unhealthy during start-up."""


class ServerDied(ServerError):
    """The server exited while in use."""


@dataclass
class Launch:
    """How to start one kind of server: its command line for a port, environment, and endpoints."""

    kind: str
    """`llamacpp` or `vllm`."""
    model: str
    """Model name the server answers to (`model` field of requests)."""
    argv: Callable[[int], list[str]]
    """Command line for a given port (the API key travels in `env`, never on the command line)."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment of the child, on top of ours."""
    api_key_env: str = ""
    """Environment variable through which the server reads its API key."""
    health_path: str = "/health"
    metrics_path: str | None = "/metrics"
    startup_timeout_s: float = 120.0
    label: str = "server"
    death_signal: int = signal.SIGKILL
    """What the kernel sends the server when the process that started it dies (kill -9 included): SIGKILL
    for a server without children, SIGTERM for one that must stop workers of its own (vLLM)."""
    profile: ModelProfile = field(default_factory=default_profile)
    slots: int = 0
    """Requests the server decodes at once (llama-server `--parallel`), which also caps `n` of one request
    there; 0: no such limit known (vLLM schedules by memory)."""


class ServerHandle:
    """A running (or stopped) managed server. Use as a context manager (sync or async) or call `stop()`."""

    def __init__(self, launch: Launch, *, port: int | str = "auto", log_dir: str | Path | None = None) -> None:
        self.launch = launch
        self.kind = launch.kind
        self.model = launch.model
        self.profile = launch.profile
        self.host = HOST
        self._requested_port: int | None = None if port in ("auto", 0, None) else int(port)
        self.port: int = 0
        self.api_key = "af-" + secrets.token_urlsafe(24)
        register_secret(self.api_key)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.log_path = Path(log_dir or cache_dir() / "serving" / "logs") / f"{launch.label}-{stamp}-{os.getpid()}-{id(self):x}.log"
        self.process: ManagedProcess | None = None
        self.restarts = 0
        self.start_seconds: float | None = None
        """Wall time of the last start-up, spawn to healthy."""
        self._log_offset = 0

    # --- addresses ---------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """OpenAI-compatible base URL, e.g. `http://127.0.0.1:41234/v1`."""
        return f"http://{self.host}:{self.port}/v1"

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"

    @property
    def spec(self) -> str:
        """Model spec for `load_model` (pass `api_key=handle.api_key`, or use `models.served_model(handle)`)."""
        return f"openai-compatible:{self.base_url}#{self.model}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.alive

    @property
    def returncode(self) -> int | None:
        return self.process.poll() if self.process is not None else None

    def log_tail(self, lines: int = 20) -> list[str]:
        return self.process.tail(lines) if self.process is not None else []

    def died_error(self) -> ServerDied:
        how = _how_it_ended(self.returncode)
        return ServerDied(f"{self.launch.label} (pid {self.pid}, port {self.port}) {how}", self.log_tail(15))

    # --- lifecycle -----------------------------------------------------------------------------------
    def start_sync(self, on_log: LogCallback | None = None) -> ServerHandle:
        """Start the server and wait until it is healthy. Raises ServerStartError / UserError."""
        reap_orphans()
        port = self._requested_port
        if port is not None and not port_is_free(port, self.host):
            raise UserError(f"port {port} on {self.host} is already in use",
                            hint="choose another --port, or --port auto")
        attempts = 1 if port is not None else 4
        started = time.monotonic()
        for _ in range(attempts):
            self.port = port if port is not None else pick_free_port(self.host)
            env = {**os.environ, **self.launch.env}
            if self.launch.api_key_env:
                env[self.launch.api_key_env] = self.api_key
            self.process = ManagedProcess(self.launch.argv(self.port), log_path=self.log_path, env=env,
                                          label=self.launch.label, death_signal=self.launch.death_signal)
            self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
            self.process.start()
            try:
                self._wait_healthy(on_log)
            except _BindFailed:
                self.process.stop()
                continue
            except BaseException:
                self.process.stop()
                raise
            self.start_seconds = time.monotonic() - started
            return self
        raise ServerStartError(f"{self.launch.label} could not bind a free port after {attempts} attempts",
                               self.log_tail(10))

    def _wait_healthy(self, on_log: LogCallback | None) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.launch.startup_timeout_s
        with httpx.Client(timeout=2.0) as client:
            while True:
                self._forward_log(on_log)
                code = self.process.poll()
                if code is not None:
                    tail = self.process.tail(15)
                    if self._requested_port is None and any(BIND_FAILURE.search(line) for line in tail):
                        raise _BindFailed
                    raise ServerStartError(f"{self.launch.label} {_how_it_ended(code)} during start-up", tail)
                try:
                    response = client.get(self.url(self.launch.health_path), headers=self.headers)
                    if response.status_code == 200:
                        self._forward_log(on_log)
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise ServerStartError(
                        f"{self.launch.label} did not become healthy within {self.launch.startup_timeout_s:.0f}s",
                        self.process.tail(15))
                time.sleep(0.2)

    def _forward_log(self, on_log: LogCallback | None) -> None:
        if on_log is None:
            return
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(self._log_offset)
                data = fh.read()
        except OSError:
            return
        complete = data.rfind(b"\n") + 1
        self._log_offset += complete
        for line in data[:complete].decode("utf-8", errors="replace").splitlines():
            on_log(redact(line))

    def stop_sync(self, timeout: float = 10.0) -> None:
        if self.process is not None:
            self.process.stop(timeout=timeout)

    def restart_sync(self, on_log: LogCallback | None = None) -> None:
        """Stop (if needed) and start again, on the same port when it is still free."""
        self.stop_sync()
        requested = self._requested_port
        if requested is None and self.port and port_is_free(self.port, self.host):
            self._requested_port = self.port
        try:
            self.start_sync(on_log)
        finally:
            self._requested_port = requested
        self.restarts += 1

    async def start(self, on_log: LogCallback | None = None) -> ServerHandle:
        await asyncio.to_thread(self.start_sync, on_log)
        return self

    async def stop(self, timeout: float = 10.0) -> None:
        await asyncio.to_thread(self.stop_sync, timeout)

    async def restart(self) -> None:
        await asyncio.to_thread(self.restart_sync)

    def __enter__(self) -> Self:
        if self.process is None:
            self.start_sync()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_sync()

    async def __aenter__(self) -> Self:
        if self.process is None:
            await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- talking to it -----------------------------------------------------------------------------
    async def health(self) -> bool:
        try:
            async with httpx.AsyncClient(timeout=2.0) as client:
                response = await client.get(self.url(self.launch.health_path), headers=self.headers)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def metrics(self) -> dict[str, float | None]:
        """The server's key figures from its metrics endpoint (see `agentflow.serving.metrics`)."""
        return await asyncio.to_thread(self.metrics_sync)

    def metrics_sync(self) -> dict[str, float | None]:
        """`metrics()` for callers outside an event loop (or in a synchronous callback: one local GET)."""
        if self.launch.metrics_path is None:
            return {}
        with httpx.Client(timeout=5.0) as client:
            response = client.get(self.url(self.launch.metrics_path), headers=self.headers)
        response.raise_for_status()
        return summarize(self.kind, response.text)

    def describe(self) -> dict[str, Any]:
        """What a user needs to connect (the key itself is left out; see `api_key`)."""
        return {"kind": self.kind, "model": self.model, "base_url": self.base_url, "spec": self.spec,
                "pid": self.pid, "port": self.port, "log": str(self.log_path),
                "start_seconds": None if self.start_seconds is None else round(self.start_seconds, 3),
                "profile": self.profile.model_dump()}


def _how_it_ended(code: int | None) -> str:
    return f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"


class _BindFailed(Exception):
    """The server could not bind its port (someone took it after we picked it)."""
