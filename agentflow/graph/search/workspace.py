"""A search branch's own workspace, kept as a snapshot of the run's sandbox (docs/security.md, "Search
branches are isolated").

Branches run concurrently but one sandbox holds one tree of files, so each branch sees it through a
`BranchSandbox`: every operation takes the sandbox's lock, restores the branch's snapshot when another branch
used the sandbox last, runs, and, when it may have written, ends the processes it left (`end_processes`) and
takes a new snapshot. The sandbox's scratch places (`/tmp`, `/dev/shm`) are saved and restored with the
branch's snapshot (`snapshot_branch`, `restore_scratch`). The sandbox's `base` stays the run's: a branch's
diff is its changes since the run's workspace was loaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentflow.sandbox.base import Sandbox


def keeps_scratch(sandbox: Any) -> bool:
    """Whether `sandbox` can save and restore its scratch places (a test double or an overlay cannot)."""
    return hasattr(sandbox, "restore_scratch") and hasattr(sandbox, "save_scratch")


async def end_processes(sandbox: Any) -> None:
    """End every process the sandbox runs but its agent and the commands the host still awaits (if it can)."""
    if (end := getattr(sandbox, "end_processes", None)) is not None:
        await end()


class SandboxTurn:
    """A lock for callers that take turns in one sandbox (a repair search's rollouts): a turn ends with every
    process started in it ended and the scratch places as they were before the first turn."""

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox
        self._lock = asyncio.Lock()
        self._scratch: str | None = None

    async def __aenter__(self) -> None:
        await self._lock.acquire()
        try:
            if self._scratch is None and keeps_scratch(self.sandbox):
                self._scratch = str(await self.sandbox.save_scratch())
        except BaseException:
            self._lock.release()
            raise

    async def __aexit__(self, *exc: object) -> None:
        try:
            await end_processes(self.sandbox)
            if self._scratch is not None:
                await self.sandbox.restore_scratch(self._scratch)
        finally:
            self._lock.release()


class SharedSandbox:
    """The run's sandbox and which snapshot its files are at now (None: not known to match any branch)."""

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox
        self.lock = asyncio.Lock()
        self.current: str | None = None
        self.current_scratch: str | None = None  # the tree the scratch places hold now (None: not known)
        self.base_scratch: str | None = None  # the main line's scratch places: every branch's at its start
        self.restores = 0  # how many times a branch switch restored a snapshot

    async def ensure_base_scratch(self) -> None:
        """Save the main line's scratch places once, before any branch runs (the caller holds the lock)."""
        if self.base_scratch is None and keeps_scratch(self.sandbox):
            self.base_scratch = self.current_scratch = str(await self.sandbox.save_scratch())

    async def snapshot(self) -> str:
        async with self.lock:
            await self.ensure_base_scratch()
            self.current = str(await self.sandbox.snapshot())
            return self.current

    async def switch(self, snapshot_id: str, scratch: str | None) -> bool:
        """Bring the sandbox to a workspace and scratch tree with no branch's process left running; whether it
        restored anything. The caller holds the lock."""
        scratch = scratch or self.base_scratch
        stale_scratch = scratch is not None and self.current_scratch != scratch
        if self.current == snapshot_id and not stale_scratch:
            return False
        await end_processes(self.sandbox)
        if self.current != snapshot_id:
            await self.sandbox.restore(snapshot_id)
            self.current = snapshot_id
        if stale_scratch:
            await self.sandbox.restore_scratch(scratch)
            self.current_scratch = scratch
        return True

    async def restore(self, snapshot_id: str) -> None:
        """The main line takes over workspace `snapshot_id`, with its own scratch places and no process left."""
        async with self.lock:
            if not await self.switch(snapshot_id, None):
                await end_processes(self.sandbox)  # a branch cancelled mid-command leaves its command


class BranchSandbox:
    """The `Sandbox` protocol over a shared sandbox, holding one branch's workspace as a snapshot."""

    def __init__(self, shared: SharedSandbox, snapshot_id: str) -> None:
        self._shared = shared
        self.snapshot_id = snapshot_id  # the snapshot this branch's workspace is at
        self.scratch: str | None = None  # its scratch places' tree (None: the main line's)
        self.restore_seconds: list[float] = []  # how long each switch to this branch's workspace took

    @contextlib.asynccontextmanager
    async def _use(self, *, writes: bool) -> AsyncIterator[Any]:
        shared = self._shared
        async with shared.lock:
            await shared.ensure_base_scratch()
            t0 = time.perf_counter()
            if await shared.switch(self.snapshot_id, self.scratch):
                self.restore_seconds.append(time.perf_counter() - t0)
                shared.restores += 1
            try:
                yield shared.sandbox
            finally:
                if writes:
                    # nothing the operation started outlives it, so nothing writes after the snapshot, and
                    # the snapshot is taken also after a failed or timed-out command: what it wrote is this
                    # branch's, in the workspace and in the scratch places
                    await end_processes(shared.sandbox)
                    await self._take_snapshot(shared)

    async def _take_snapshot(self, shared: SharedSandbox) -> None:
        if keeps_scratch(shared.sandbox) and hasattr(shared.sandbox, "snapshot_branch"):
            sid, self.scratch = await shared.sandbox.snapshot_branch()
            shared.current_scratch = self.scratch
        else:
            sid = await shared.sandbox.snapshot()
        self.snapshot_id = shared.current = str(sid)

    async def exec(self, command: str, *args: Any, **kwargs: Any) -> Any:
        async with self._use(writes=True) as sb:
            return await sb.exec(command, *args, **kwargs)

    async def read_file(self, path: str) -> str:
        async with self._use(writes=False) as sb:
            return str(await sb.read_file(path))

    async def read_bytes(self, path: str) -> bytes:
        async with self._use(writes=False) as sb:
            return bytes(await sb.read_bytes(path))

    async def write_file(self, path: str, content: str | bytes, **kwargs: Any) -> None:
        async with self._use(writes=True) as sb:
            await sb.write_file(path, content, **kwargs)

    async def list_files(self, path: str = ".", recursive: bool = False) -> Any:
        async with self._use(writes=False) as sb:
            return await sb.list_files(path, recursive)

    async def upload(self, source: Any, dest: str = ".") -> int:
        async with self._use(writes=True) as sb:
            return int(await sb.upload(source, dest))

    async def apply_patch(self, diff: str) -> Any:
        async with self._use(writes=True) as sb:
            return await sb.apply_patch(diff)

    async def end_processes(self) -> None:
        """Processes end as each operation ends (see `_use`): none of this branch's is running between them."""

    async def save_scratch(self) -> str:
        """The tree of this branch's scratch places (saved as each operation ends)."""
        async with self._use(writes=False):
            return str(self.scratch or self._shared.current_scratch)

    async def restore_scratch(self, tree: str) -> None:
        self.scratch = tree  # taken up by the next operation

    async def snapshot(self) -> str:
        return self.snapshot_id

    async def restore(self, snapshot_id: str) -> None:
        self.snapshot_id = snapshot_id  # taken up by the next operation

    @property
    def base(self) -> str | None:
        base = self._shared.sandbox.base
        return str(base) if base is not None else None

    async def diff(self, base: str | None = None) -> str:
        """This branch's changes since `base` (default: the run's), from the snapshot store when it can."""
        sandbox = self._shared.sandbox
        start = base or self.base
        if start is not None and hasattr(sandbox, "diff_snapshots"):
            return str(await sandbox.diff_snapshots(start, self.snapshot_id))
        async with self._use(writes=False) as sb:
            return str(await sb.diff(base))

    def info(self) -> Any:
        return self._shared.sandbox.info()

    def attach_events(self, events: Any) -> None:
        """Events of the shared sandbox stay the run's (a branch's tool calls carry its id already)."""

    async def close(self) -> None:
        """The run owns the sandbox: a branch closing is not the sandbox closing."""

    def __getattr__(self, name: str) -> Any:
        # read-only facts of the sandbox (id, workdir, limits); anything that acts goes through a method above
        return getattr(self._shared.sandbox, name)


def branch_sandbox(sandbox: Sandbox | BranchSandbox | None) -> BranchSandbox | None:
    """A search branch's workspace (the sandbox of its context), else None."""
    return sandbox if isinstance(sandbox, BranchSandbox) else None


__all__ = ["BranchSandbox", "SandboxTurn", "SharedSandbox", "branch_sandbox", "end_processes", "keeps_scratch"]
