"""Long calls of the MCP server (`repair`, `run_workflow`): each runs agentflow's own command line in a child
process (its entry points as they are, and a crash there cannot take the server down), while the events it
writes are forwarded to the MCP client as progress notifications."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentflow.errors import ToolError

Progress = Callable[[float, str], Awaitable[None]]
"""`await progress(count, message)`: one progress notification."""

POLL_S = 0.5
STDERR_TAIL = 600


class JobResult:
    """How a child command ended: exit code, stdout, the tail of stderr."""

    def __init__(self, code: int, stdout: str, stderr: str) -> None:
        self.code, self.stdout, self.stderr = code, stdout, stderr

    def json_output(self) -> Any:
        """The command's `--json` result: the whole output, or its last line for line-by-line commands."""
        text = self.stdout.strip()
        for candidate in (text, text.splitlines()[-1] if text else ""):
            with contextlib.suppress(ValueError):
                return json.loads(candidate)
        tail = " ".join(self.stderr.split())[-STDERR_TAIL:]
        raise ToolError(f"the command ended with exit code {self.code} and no result: {tail or '(no output)'}")


async def run_cli(args: list[str], *, events_glob: tuple[Path, str], progress: Progress, timeout: float) -> JobResult:
    """Run `agentflow ARGS`; while it runs, report each new event under `events_glob` (folder, pattern)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentflow.cli.main", *args, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # stopped as a group on timeout or cancellation
    )
    finished = asyncio.Event()
    watcher = asyncio.create_task(_forward_events(*events_glob, progress, finished))
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except (TimeoutError, asyncio.CancelledError) as exc:
        _kill_group(proc.pid)
        await proc.wait()
        if isinstance(exc, asyncio.CancelledError):
            raise
        raise ToolError(f"the job ran longer than {timeout:g}s and was stopped") from None
    finally:
        finished.set()  # the watcher reports what the job wrote last, then stops
        try:
            await asyncio.wait_for(asyncio.shield(watcher), 5)
        except (TimeoutError, asyncio.CancelledError):
            watcher.cancel()
    return JobResult(proc.returncode or 0, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


async def _forward_events(folder: Path, pattern: str, progress: Progress, finished: asyncio.Event) -> None:
    """Tail every events file matching `pattern` under `folder`; one notification per event."""
    offsets: dict[Path, int] = {}
    count = 0
    while True:
        last_round = finished.is_set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(finished.wait(), POLL_S)
        for line in await asyncio.to_thread(_new_lines, folder, pattern, offsets):
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                count += 1
                await progress(count, _describe(event))
        if last_round:
            return


def _new_lines(folder: Path, pattern: str, offsets: dict[Path, int]) -> list[bytes]:
    """Complete lines added to the matching files since the last look (offsets are updated)."""
    lines: list[bytes] = []
    for path in sorted(folder.glob(pattern)) if folder.is_dir() else []:
        with contextlib.suppress(OSError), open(path, "rb") as fh:
            fh.seek(offsets.get(path, 0))
            chunk = fh.read()
            complete = chunk[: chunk.rfind(b"\n") + 1]
            offsets[path] = offsets.get(path, 0) + len(complete)
            lines.extend(complete.splitlines())
    return lines


def _describe(event: dict[str, Any]) -> str:
    data = event.get("data") or {}
    where = event.get("node_id") or data.get("name") or ""
    status = data.get("status") or ("ok" if data.get("ok") else "failed" if data.get("ok") is False else "")
    return " ".join(str(p) for p in (event.get("kind", "event"), where, status) if p)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
