"""`SandboxPool`: N started sandboxes ready to hand out. A snapshot taken in one can be restored in any other:
each sandbox keeps its own git object store (a shared writable one would let one sandbox rewrite another's
snapshots), and a restore elsewhere copies the snapshot's objects over as a pack, which git verifies by
hashing. `release` resets the workspace, or replaces a sandbox that broke."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, Literal, Self

from agentflow.errors import ConfigError, SandboxError
from agentflow.sandbox import resolve_backend, resolve_config, start_sandbox
from agentflow.sandbox.config import SandboxConfig
from agentflow.sandbox.session import AgentSandbox, NoSpaceError

_MAX_HAVE = 64  # snapshots named as already held when a pack is built (enough to find the shared base)


class SandboxPool:
    """A warm pool. Use as `async with SandboxPool(4, config) as pool: sb = await pool.acquire()`."""

    def __init__(self, size: int = 2, config: SandboxConfig | dict[str, Any] | None = None,
                 backend: Literal["auto", "docker", "local"] = "auto", *, events: Any = None) -> None:
        if size < 1:
            raise ConfigError(f"pool size must be at least 1, got {size}")
        self.size = size
        self.config = resolve_config(config)
        self.backend = resolve_backend(backend)
        self._ready: asyncio.Queue[AgentSandbox] = asyncio.Queue()
        self._all: set[AgentSandbox] = set()
        self._started = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self.events = events

    async def start(self) -> SandboxPool:
        self._started = True
        for sb in await asyncio.gather(*(self._new() for _ in range(self.size - len(self._all)))):
            self._ready.put_nowait(sb)
        return self

    async def _new(self) -> AgentSandbox:
        sb = await start_sandbox(self.backend, self.config, events=self.events)
        sb.peer_fetch = self._fetch_snapshot
        self._all.add(sb)
        return sb

    async def _fetch_snapshot(self, snapshot_id: str, receiver: AgentSandbox) -> None:
        """Copy a snapshot held by another of this pool's sandboxes into `receiver` (without the objects of
        snapshots both hold). The sandbox that took it is asked first; a holder whose pack does not import
        (its store may have been tampered with) is skipped for the next one."""
        holders = [sb for sb in self._all if sb is not receiver and snapshot_id in sb._snapshots and sb.healthy()]
        holders.sort(key=lambda sb: snapshot_id not in sb._taken)
        for sb in holders:
            shared = sorted(sb._snapshots & receiver._snapshots)[:_MAX_HAVE]
            try:
                await receiver.import_snapshot(snapshot_id, await sb.export_snapshot(snapshot_id, shared))
                return
            except NoSpaceError:
                raise  # the receiver's store is full: no other holder can help
            except SandboxError:
                continue

    @property
    def ready(self) -> int:
        return self._ready.qsize()

    async def acquire(self) -> AgentSandbox:
        """A started sandbox with an empty workspace (waits when all are in use and being replaced)."""
        if not self._started:
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

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
