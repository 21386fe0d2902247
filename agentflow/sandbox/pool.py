"""`SandboxPool`: N started sandboxes ready to hand out, sharing one git object store (so a snapshot taken in
one can be restored in any other). `release` resets the workspace, or replaces a sandbox that broke."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, Literal, Self

from agentflow.sandbox.config import SandboxConfig
from agentflow.sandbox.session import AgentSandbox


class SandboxPool:
    """A warm pool. Use as `async with SandboxPool(4, config) as pool: sb = await pool.acquire()`."""

    def __init__(
        self,
        size: int = 2,
        config: SandboxConfig | dict[str, Any] | None = None,
        backend: Literal["auto", "docker", "local"] = "auto",
        *,
        events: Any = None,
    ) -> None:
        from agentflow.sandbox import resolve_backend, resolve_config

        if size < 1:
            from agentflow.errors import ConfigError

            raise ConfigError(f"pool size must be at least 1, got {size}")
        self.size = size
        self.config = resolve_config(config)
        self.backend = resolve_backend(backend)
        self._ready: asyncio.Queue[AgentSandbox] = asyncio.Queue()
        self._all: set[AgentSandbox] = set()
        self._store: Any = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self.events = events

    async def start(self) -> SandboxPool:
        if self._store is None:
            if self.backend == "docker":
                from agentflow.sandbox.docker import create_store

                self._store = await asyncio.to_thread(create_store)
            else:
                import tempfile

                self._store = tempfile.mkdtemp(prefix="agentflow-store-")
        started = await asyncio.gather(*(self._new() for _ in range(self.size - len(self._all))))
        for sb in started:
            self._ready.put_nowait(sb)
        return self

    async def _new(self) -> AgentSandbox:
        if self.backend == "docker":
            from agentflow.sandbox.docker import DockerSandbox

            sb: AgentSandbox = await DockerSandbox.start(self.config, store=self._store)
        else:
            from agentflow.sandbox.local import LocalSandbox

            sb = await LocalSandbox.start(self.config, store=self._store)
        self._all.add(sb)
        sb.attach_events(self.events)
        return sb

    @property
    def ready(self) -> int:
        return self._ready.qsize()

    async def acquire(self) -> AgentSandbox:
        """A started sandbox with an empty workspace (waits when all are in use and being replaced)."""
        if self._store is None:
            await self.start()
        while True:
            if self._ready.empty() and len(self._all) < self.size:
                self._spawn(self._replenish())
            sb = await self._ready.get()
            if sb.healthy():
                return sb
            await self._discard(sb)

    async def release(self, sb: AgentSandbox, *, reset: bool = True) -> None:
        """Give a sandbox back: its workspace is emptied (in the background) or, if it broke, it is replaced."""
        if self._closed:
            await sb.close()
            return
        self._spawn(self._recycle(sb, reset))

    @contextlib.asynccontextmanager
    async def sandbox(self) -> AsyncIterator[AgentSandbox]:
        sb = await self.acquire()
        try:
            yield sb
        finally:
            await self.release(sb)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _recycle(self, sb: AgentSandbox, reset: bool) -> None:
        with contextlib.suppress(Exception):
            if sb.healthy() and reset:
                await sb.reset_workspace()
            if sb.healthy():
                self._ready.put_nowait(sb)
                return
        await self._discard(sb)
        await self._replenish()

    async def _replenish(self) -> None:
        if self._closed or len(self._all) >= self.size:
            return
        self._ready.put_nowait(await self._new())

    async def _discard(self, sb: AgentSandbox) -> None:
        self._all.discard(sb)
        with contextlib.suppress(Exception):
            await sb.close()

    async def close(self) -> None:
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(sb.close() for sb in list(self._all)), return_exceptions=True)
        self._all.clear()
        if self._store is not None:
            if self.backend == "docker":
                from agentflow.sandbox.docker import remove_store

                await asyncio.to_thread(remove_store, self._store)
            else:
                import shutil

                shutil.rmtree(self._store, ignore_errors=True)
            self._store = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
