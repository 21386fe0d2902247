"""The `Sandbox` interface: where agent-written code runs. Backends: docker (hardened) and local (NOT a
security boundary). This module imports nothing heavy."""

from __future__ import annotations

import shlex
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field


def sh_command(script: str) -> str:
    """`script` as one `sh -c` command line for `Sandbox.exec` (quoted for the shell)."""
    return f"sh -c {shlex.quote(script)}"


class ExecResult(BaseModel):
    """Outcome of one command."""

    exit_code: int
    """Process exit code; -N when killed by signal N; 124 on timeout."""
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    timed_out: bool = False
    truncated: bool = False
    """True when output was cut (head and tail kept)."""
    omitted_bytes: int = 0
    """How many bytes of output were cut."""
    limit_hit: str | None = None
    """Which limit stopped the command: `timeout`, `memory`, `pids`, `output`, `disk`, or None."""
    results: str | None = None
    """What the command wrote to its side channel (`exec(..., side_channel=True)`); None when not asked or
    when it wrote more than the agent keeps."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def output(self) -> str:
        return self.stdout + (("\n" + self.stderr) if self.stderr else "")


class FileEntry(BaseModel):
    path: str
    is_dir: bool = False
    size: int = 0


class SandboxInfo(BaseModel):
    """Effective settings of a sandbox, recorded in the run."""

    backend: str
    image: str | None = None
    workdir: str
    settings: dict[str, object] = Field(default_factory=dict)


@runtime_checkable
class Sandbox(Protocol):
    """An isolated workspace with a shell. All paths are relative to `workdir` unless absolute."""

    id: str
    workdir: str

    async def exec(
        self, command: str, *, cwd: str | None = None, env: dict[str, str] | None = None, stdin: str | None = None,
        timeout: float | None = None, side_channel: bool = False,
    ) -> ExecResult: ...

    async def read_file(self, path: str) -> str: ...

    async def write_file(self, path: str, content: str) -> None: ...

    async def list_files(self, path: str = ".", recursive: bool = False) -> list[FileEntry]: ...

    async def apply_patch(self, diff: str) -> ExecResult: ...

    async def snapshot(self) -> str:
        """Id of the current workspace state (tracked and untracked files)."""
        ...

    async def restore(self, snapshot_id: str) -> None:
        """Bring the workspace to a state returned by `snapshot()` (of any sandbox of the same base)."""
        ...

    async def diff(self, base: str | None = None) -> str:
        """Unified diff of the workspace against `base` (a snapshot id or commit; default: the initial state)."""
        ...

    def info(self) -> SandboxInfo: ...

    async def close(self) -> None: ...
