"""An in-memory workspace for one tool-calling edit: the repository's Python sources, and what the model wrote.

The samples of a search edit concurrently while the task's sandbox serves one attempt at a time, so a
tool-calling coder edits an overlay instead: the editor tools read and write it as they would a sandbox,
and the changed files become the sample's edit, applied and verified like any other. It has no shell.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

from agentflow.errors import SandboxError
from agentflow.sandbox.base import ExecResult, FileEntry, SandboxInfo

__all__ = ["SourceOverlay"]


class SourceOverlay:
    """Files by relative path; reads see the model's writes. Implements the file half of `Sandbox`."""

    def __init__(self, sources: Mapping[str, str]) -> None:
        self.id = "overlay"
        self.workdir = "/workspace"
        self._base = dict(sources)
        self._files = dict(sources)

    def _key(self, path: str) -> str:
        if path.startswith(self.workdir + "/"):
            path = path[len(self.workdir) + 1 :]
        key = posixpath.normpath(path.lstrip("/")) if path not in ("", ".") else "."
        if key.startswith(".."):
            raise SandboxError(f"{path} is outside the workspace")
        return key

    def changed(self) -> dict[str, str]:
        """Files whose text differs from the sources the overlay started with (new files included)."""
        return {p: t for p, t in self._files.items() if self._base.get(p) != t}

    async def read_file(self, path: str) -> str:
        key = self._key(path)
        if key not in self._files:
            raise SandboxError(f"{path}: no such file among the repository's Python sources")
        return self._files[key]

    async def write_file(self, path: str, content: str) -> None:
        self._files[self._key(path)] = content

    async def list_files(self, path: str = ".", recursive: bool = False) -> list[FileEntry]:
        key = self._key(path)
        if key in self._files:
            raise SandboxError(f"{path} is a file")
        prefix = "" if key == "." else key + "/"
        entries: dict[str, FileEntry] = {}
        for name, text in sorted(self._files.items()):
            if not name.startswith(prefix):
                continue
            rest = name[len(prefix) :]
            if recursive or "/" not in rest:
                entries[name] = FileEntry(path=name, size=len(text))
            else:
                folder = prefix + rest.split("/", 1)[0]
                entries.setdefault(folder, FileEntry(path=folder, is_dir=True))
        if not entries and prefix:
            raise SandboxError(f"{path}: no such directory")
        return list(entries.values())

    async def exec(self, command: str, *, cwd: str | None = None, env: dict[str, str] | None = None,
                   stdin: str | None = None, timeout: float | None = None, side_channel: bool = False) -> ExecResult:
        raise SandboxError("an edit session has no shell: view and edit files with the editor tools")

    async def apply_patch(self, diff: str) -> ExecResult:
        raise SandboxError("an edit session applies no patches: edit with str_replace")

    async def snapshot(self) -> str:
        raise SandboxError("an edit session has no snapshots")

    async def restore(self, snapshot_id: str) -> None:
        raise SandboxError("an edit session has no snapshots")

    async def diff(self, base: str | None = None) -> str:
        raise SandboxError("an edit session has no diff; see changed()")

    def info(self) -> SandboxInfo:
        return SandboxInfo(backend="overlay", workdir=self.workdir)

    async def close(self) -> None:
        return None
