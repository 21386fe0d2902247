"""A search branch's own workspace, kept as a snapshot of the run's sandbox.

Branches of a search run concurrently (their model calls overlap, which is where the time goes), but one
sandbox holds one tree of files. So each branch sees the sandbox through a `BranchSandbox`: it remembers
the snapshot its workspace is at, and every operation takes the sandbox's lock, restores that snapshot when
another branch used the sandbox last, runs, and — when the operation may have written — takes a new
snapshot. Forking a branch is copying a snapshot id; switching costs one restore (tens of milliseconds,
`benchmarks/sandbox.py`), and nothing is restored while one branch works alone.

A branch gives up the sandbox with nothing of it still running: every operation that may have started a
process ends, before its snapshot is taken, every process in the sandbox but its agent (`end_processes`;
commands the host still awaits, such as another branch's diff, are spared), and a switch to another branch
ends them again before restoring. So a background job a branch leaves (nohup, setsid, a double fork) cannot
write into the next branch's workspace, tests or value, and a branch's snapshot is all it did: nothing of
it writes after the snapshot is taken (docs/security.md, "Search branches are isolated").

The sandbox's `base` (what `diff()` compares against) is the run's: a branch's diff is its changes since
the run's workspace was loaded, as the main line's would be.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentflow.graph.context import RunHandles


async def end_processes(sandbox: Any) -> None:
    """End every process the sandbox runs but its agent and the commands the host still awaits. A sandbox
    without `end_processes` runs no processes of its own (a test double, an in-memory overlay)."""
    end = getattr(sandbox, "end_processes", None)
    if end is not None:
        await end()


class SandboxTurn:
    """A lock for callers that take turns in one sandbox (the rollouts of a repair search, each setting the
    workspace to its candidate and testing it): a turn ends with every process started in it ended, so none
    works on into the next holder's turn. `async with turn:` as with an `asyncio.Lock`."""

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox
        self._lock = asyncio.Lock()

    def locked(self) -> bool:
        return self._lock.locked()

    async def __aenter__(self) -> None:
        await self._lock.acquire()

    async def __aexit__(self, *exc: object) -> None:
        try:
            await end_processes(self.sandbox)
        finally:
            self._lock.release()


class SharedSandbox:
    """The run's sandbox and which snapshot its files are at now (None: not known to match any branch)."""

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox
        self.lock = asyncio.Lock()
        self.current: str | None = None
        self.restores = 0
        """How many times a branch switch restored a snapshot (reported by the search)."""

    async def snapshot(self) -> str:
        async with self.lock:
            self.current = str(await self.sandbox.snapshot())
            return self.current

    async def restore(self, snapshot_id: str) -> None:
        """Set the sandbox's files to `snapshot_id` (the main line takes over the chosen branch's workspace),
        with no process of any branch left running (a branch cancelled mid-command leaves its command)."""
        async with self.lock:
            await end_processes(self.sandbox)
            if self.current != snapshot_id:
                await self.sandbox.restore(snapshot_id)
                self.current = snapshot_id


class BranchSandbox:
    """The `Sandbox` protocol over a shared sandbox, holding one branch's workspace as a snapshot."""

    def __init__(self, shared: SharedSandbox, snapshot_id: str) -> None:
        self._shared = shared
        self.snapshot_id = snapshot_id
        """The snapshot this branch's workspace is at."""
        self.restore_seconds: list[float] = []
        """How long each switch to this branch's workspace took (the search reports them)."""

    @contextlib.asynccontextmanager
    async def _use(self, *, writes: bool) -> AsyncIterator[Any]:
        shared = self._shared
        async with shared.lock:
            if shared.current != self.snapshot_id:
                t0 = time.perf_counter()
                # the last user ended its processes as it left; one cancelled mid-command could not
                await end_processes(shared.sandbox)
                await shared.sandbox.restore(self.snapshot_id)
                self.restore_seconds.append(time.perf_counter() - t0)
                shared.current = self.snapshot_id
                shared.restores += 1
            try:
                yield shared.sandbox
            finally:
                if writes:
                    # nothing the operation started outlives it, so nothing writes after the snapshot, and
                    # the snapshot is taken also after a failed or timed-out command: what it wrote is this
                    # branch's
                    await end_processes(shared.sandbox)
                    self.snapshot_id = str(await shared.sandbox.snapshot())
                    shared.current = self.snapshot_id

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

    async def snapshot(self) -> str:
        return self.snapshot_id

    async def restore(self, snapshot_id: str) -> None:
        self.snapshot_id = snapshot_id  # taken up by the next operation

    @property
    def base(self) -> str | None:
        base = self._shared.sandbox.base
        return str(base) if base is not None else None

    async def diff(self, base: str | None = None) -> str:
        """This branch's changes since `base` (default: the run's base). From the snapshot store when the
        sandbox can (no restore, no wait for the branch using the sandbox), else in the workspace."""
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


__all__ = ["BranchSandbox", "SandboxTurn", "SharedSandbox", "end_processes"]


def branch_sandbox(rt: RunHandles[Any]) -> BranchSandbox | None:
    """A search branch's workspace (its context's sandbox: `SearchRun` gives each branch one); None without."""
    return rt.sandbox if isinstance(rt.sandbox, BranchSandbox) else None
