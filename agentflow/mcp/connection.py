"""`McpConnection`: one MCP server, started on first use, restarted after it crashes or hangs.

The SDK's `Client` is an anyio context: it must be entered and left by the same task. So each connection
runs an *owner* task that holds `async with Client(...)` open until `aclose()`; tool calls from any task
of the same event loop go through the open session, and each call races the owner task, so a server that
dies mid-call ends that call at once instead of leaving it waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Self, TextIO

from agentflow.errors import DependencyMissing, ToolError, UserError
from agentflow.events import Event
from agentflow.events.kinds import McpServerExit, McpServerFailed, McpServerStart, McpServerStop
from agentflow.mcp.config import McpServerConfig

if TYPE_CHECKING:
    import mcp_types

    from agentflow.events import EventLog

STDERR_TAIL_CHARS = 300
"""How much of a stdio server's stderr a failed start quotes."""

STOP_TIMEOUT_S = 10.0
"""Longest wait for a server to stop (the SDK closes stdin, then sends SIGTERM, then SIGKILL)."""


def require_sdk(needed_by: str = "tools from MCP servers") -> None:
    """A one-line error naming the extra when the `mcp` SDK is not installed."""
    try:
        import jsonschema  # noqa: F401
        import mcp  # noqa: F401
    except ImportError:
        raise DependencyMissing("mcp", "mcp", needed_by) from None


class McpServerDied(ToolError):
    """The server stopped answering during a call (crashed, hung or closed the connection)."""


class McpConnection:
    """A lazily started, restartable connection to one MCP server (shared by every agent of a run)."""

    def __init__(self, config: McpServerConfig, *, events: EventLog | None = None) -> None:
        self.config = config
        self.events = events
        self._client: Any = None
        self._owner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._errlog: TextIO | None = None
        self._ended = False  # the transport saw the end of the server's output (it exited or hung up)
        self._generation = 0  # which start the transport callbacks belong to
        self.starts = 0
        """How many times the server was started (1 + restarts)."""

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def running(self) -> bool:
        owner = self._owner
        return owner is not None and not owner.done() and self._client is not None and not self._ended

    async def client(self) -> Any:
        """The connected SDK `Client`, starting (or restarting) the server first when needed."""
        require_sdk()
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop (e.g. a second asyncio.run): the old one is gone
            self._loop, self._lock, self._owner, self._client = loop, asyncio.Lock(), None, None
        assert self._lock is not None
        async with self._lock:
            if not self.running:
                await self._reset()
                await self._start()
            return self._client

    async def list_tools(self) -> list[mcp_types.Tool]:
        """Every tool the server offers (all pages)."""
        client = await self.client()
        tools: list[Any] = []
        cursor: str | None = None
        for _ in range(100):  # a server that pages forever cannot hang the listing
            page = await self._race(client.list_tools(cursor=cursor), self.config.start_timeout_s, "tools/list")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any], timeout: float | None) -> Any:
        """`tools/call` on the server: the SDK's `CallToolResult`. A crash or hang raises `McpServerDied`
        (and the server is restarted by the next call)."""
        client = await self.client()
        return await self._race(client.call_tool(name, arguments), timeout, f"tool '{name}'")

    async def _race(self, call: Any, timeout: float | None, what: str) -> Any:
        owner = self._owner
        assert owner is not None
        task = asyncio.ensure_future(call)
        try:
            done, _ = await asyncio.wait({task, owner}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task in done:
            try:
                return task.result()
            except Exception as exc:  # noqa: BLE001 - whatever the transport raised, the call failed
                if _refused(exc):  # the server answered with an error: it is alive
                    raise ToolError(f"MCP server '{self.name}' refused {what}: {_one_line(exc)}") from None
                died = self._died(what, f"the connection ended ({_one_line(exc)})")
                await self._reset(owner)
                raise died from None
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        if owner in done:
            raise self._died(what, "the server exited during the call")
        died = self._died(what, f"no answer within {timeout:g}s (the server was stopped)")
        await self._reset(owner)  # hung: stop it now, the next call starts a fresh one
        raise died

    def _died(self, what: str, why: str) -> McpServerDied:
        self._emit(McpServerFailed(server=self.name, what=what, reason=why))
        return McpServerDied(
            f"MCP server '{self.name}' failed during {what}: {why}; it is restarted for the next call"
        )

    async def _start(self) -> None:
        from mcp import Client

        cfg = self.config
        self._stop = asyncio.Event()
        self._ended = False
        self._generation += 1
        ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        generation = self._generation
        transport = _end_watched(self._target(), lambda: self._transport_ended(generation))
        self._owner = asyncio.create_task(self._own(Client(transport), ready), name=f"mcp:{self.name}")
        try:
            done, _ = await asyncio.wait(
                {ready, self._owner}, timeout=cfg.start_timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
            if ready not in done:
                late = f"it did not answer within {cfg.start_timeout_s:g}s"
                raise RuntimeError("it exited during the handshake" if done else late)
            self._client = ready.result()
        except Exception as exc:  # noqa: BLE001 - any failure to start is the one-line error below
            await self._reset()
            tail = self._stderr_tail()
            raise UserError(
                f"MCP server '{self.name}' ({cfg.describe()}) failed to start: {_one_line(exc)}"
                + (f"; stderr: {tail}" if tail else ""),
                hint="check the command/URL and run it by hand",
            ) from None
        self.starts += 1
        self._emit(McpServerStart(server=self.name, target=cfg.describe(), starts=self.starts))

    def _target(self) -> Any:
        cfg = self.config
        if cfg.url is not None:
            return self._http_transport()
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        env = {name: os.environ[name] for name in cfg.pass_env if name in os.environ}
        env.update(cfg.env)
        if self._errlog is not None:
            self._errlog.close()
        self._errlog = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        params = StdioServerParameters(command=cfg.argv[0], args=cfg.argv[1:], env=env, cwd=cfg.cwd)
        return stdio_client(params, errlog=self._errlog)

    def _http_transport(self) -> Any:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        cfg = self.config
        headers: dict[str, str] = {}
        if cfg.bearer_token_env is not None:
            token = os.environ.get(cfg.bearer_token_env)
            if not token:
                raise UserError(
                    f"MCP server '{self.name}': environment variable {cfg.bearer_token_env} is not set",
                    hint="export the server's bearer token in it",
                )
            headers["Authorization"] = f"Bearer {token}"
        http = create_mcp_http_client(headers=headers)
        return _owned_http(streamable_http_client(str(cfg.url), http_client=http), http)

    def _transport_ended(self, generation: int) -> None:
        """The server's output ended while connected: the next call starts it again instead of failing."""
        if generation != self._generation:  # an old server, already replaced
            return
        if not self._ended and self._client is not None:
            self._emit(McpServerExit(server=self.name))
        self._ended = True

    async def _own(self, client: Any, ready: asyncio.Future[Any]) -> None:
        """The owner task: keeps the session open until `_stop` is set or the server goes away."""
        try:
            async with client:
                ready.set_result(client)
                assert self._stop is not None
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(RuntimeError(_one_line(exc)) if isinstance(exc, Exception) else exc)
            if isinstance(exc, asyncio.CancelledError):
                raise

    async def _reset(self, expected: asyncio.Task[None] | None = None) -> None:
        """Stop the owner task (and with it the server), if any; with `expected`, only if that is still the
        current one (a call that failed on an old server must not stop the server started since)."""
        if expected is not None and self._owner is not expected:
            return
        owner, self._owner, self._client = self._owner, None, None
        if owner is None:
            return
        if self._stop is not None:
            self._stop.set()
        if not owner.done():
            try:
                await asyncio.wait_for(asyncio.shield(owner), STOP_TIMEOUT_S)
            except (TimeoutError, asyncio.CancelledError):
                owner.cancel()
        with contextlib.suppress(BaseException):
            await owner

    async def aclose(self) -> None:
        """Stop the server (it starts again on the next use)."""
        was_running = self._owner is not None
        if self._loop is asyncio.get_running_loop():
            await self._reset()
        if self._errlog is not None:
            self._errlog.close()
            self._errlog = None
        if was_running:
            self._emit(McpServerStop(server=self.name, starts=self.starts))

    def _stderr_tail(self) -> str:
        log = self._errlog
        if log is None or log.closed:
            return ""
        try:
            log.flush()
            size = log.seek(0, os.SEEK_END)
            log.seek(max(0, size - STDERR_TAIL_CHARS * 4))
            text = log.read()
        except (OSError, ValueError):
            return ""
        return _one_line(text)[-STDERR_TAIL_CHARS:]

    def _emit(self, event: Event) -> None:
        if self.events is not None:
            self.events.write(event)


@contextlib.asynccontextmanager
async def _end_watched(inner: Any, on_end: Callable[[], None]) -> AsyncIterator[Any]:
    """A transport whose read stream reports its end (EOF or close) through `on_end`."""
    async with inner as (read, write):
        yield _WatchedStream(read, on_end), write


class _WatchedStream:
    """Pass-through of a receive stream that calls `on_end` when iteration stops."""

    def __init__(self, inner: Any, on_end: Any) -> None:
        self._inner, self._on_end = inner, on_end

    def __getattr__(self, name: str) -> Any:  # e.g. `last_context` of the HTTP transport's stream
        return getattr(self._inner, name)

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        return await self._inner.__aexit__(*exc)

    def __aiter__(self) -> _WatchedStream:
        return self

    async def __anext__(self) -> Any:
        return await self._watched(self._inner.__anext__())

    async def receive(self) -> Any:
        return await self._watched(self._inner.receive())

    async def _watched(self, step: Any) -> Any:
        try:
            return await step
        except BaseException:
            self._on_end()
            raise


@contextlib.asynccontextmanager
async def _owned_http(inner: Any, http: Any) -> AsyncIterator[Any]:
    """The HTTP transport plus the httpx client it uses, closed together."""
    async with http, inner as streams:
        yield streams


def _refused(exc: BaseException) -> bool:
    """An error answer from a live server (not a closed connection or a transport failure)."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    return isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED


def _one_line(exc: BaseException | str) -> str:
    if isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0] if exc.exceptions else exc
    text = exc if isinstance(exc, str) else (str(exc) or type(exc).__name__)
    return " ".join(text.split())
