"""Local-process backend: the agent runs as a child process in a temp directory, with rlimits on commands.

This is NOT a security boundary: commands run as your user, see your files and your network. It exists for
machines without Docker (development, CI without a daemon) and is used only when asked for by name (a
`LocalBackendWarning` says so each time). What it does limit: commands get a scrubbed environment (no API
keys or tokens of yours), rlimits, and no process or temp dir outlives the sandbox: the agent is a child
subreaper, so jobs that detach (setsid, double fork) stay below it, and it kills its whole tree at close, when
its stdin closes and when the host dies (a parent-death signal). A host killed with -9 leaves its temp dir,
which the next start removes. What it cannot do: a command may kill the agent itself (it runs as you), and
the processes below it then escape to init. Snapshots work the same way as in Docker.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

from agentflow._process import pid_alive
from agentflow.errors import SandboxError
from agentflow.sandbox.config import SandboxConfig
from agentflow.sandbox.session import BOOT, AgentSandbox

_PREFIX = "agentflow-sandbox-"
# The only host variables a local sandbox's commands see: enough to find programs and decode text.
_KEPT_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
SCRATCH = "scratch"
"""The sandbox's scratch folder (HOME, TMPDIR), next to its workspace in its temp dir."""


class LocalBackendWarning(UserWarning):
    """The local backend runs model-written code on this machine: it is not a security boundary."""


def scrubbed_env(root: Path) -> dict[str, str]:
    """The environment of a local sandbox: a few harmless host variables, nothing secret. HOME, TMPDIR and the
    XDG folders are the sandbox's scratch folder, which a search branch keeps as its own."""
    env = {k: os.environ[k] for k in _KEPT_ENV if k in os.environ}
    scratch = str(root / SCRATCH)
    env.update({"HOME": scratch, "TMPDIR": scratch, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"})
    env.update({f"XDG_{kind}_HOME": f"{scratch}/.{kind.lower()}" for kind in ("CONFIG", "CACHE", "DATA", "STATE")})
    return env


def reap_local_orphans(tmp: str | None = None) -> list[str]:
    """Remove temp dirs of local sandboxes whose owner process is gone (killed with -9)."""
    removed = []
    base = Path(tmp or tempfile.gettempdir())
    for d in base.glob(f"{_PREFIX}*"):
        try:
            pid = int(d.name[len(_PREFIX) :].split("-", 1)[0])
        except ValueError:
            continue
        if pid != os.getpid() and not pid_alive(pid) and d.is_dir():
            shutil.rmtree(d, ignore_errors=True)
            removed.append(str(d))
    return removed


class LocalSandbox(AgentSandbox):
    """A temp-dir workspace driven by a local agent process. Start with `await LocalSandbox.start(config)`."""

    backend = "local"

    def __init__(self, config: SandboxConfig, root: Path) -> None:
        super().__init__(
            f"local-{secrets.token_hex(5)}", config, str(root / "workspace"), str(root / "snap"), str(root / "store")
        )
        self.root = root
        self._proc: asyncio.subprocess.Process | None = None

    @classmethod
    async def start(cls, config: SandboxConfig | None = None) -> LocalSandbox:
        config = config or SandboxConfig()
        warnings.warn(
            "the local sandbox backend is not a security boundary: model-written code runs on this machine "
            "as you (with a scrubbed environment); use --sandbox docker to isolate it",
            LocalBackendWarning, stacklevel=2,
        )
        await asyncio.to_thread(reap_local_orphans)
        root = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
        for folder in ("store", "workspace", SCRATCH):
            (root / folder).mkdir()
        sb = cls(config, root)
        return await sb._start_or_close(sb._start())

    async def _start(self) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-u", "-c", BOOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, cwd=self.workdir, env=scrubbed_env(self.root), start_new_session=True,
            limit=1 << 26,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        await self._connect(self._proc.stdin, self._read_lines(self._proc.stdout))
        memory, disk = max(self.config.memory_mb, 256) << 20, self.config.workspace_size_mb << 20
        await self._hello(rlimits={"RLIMIT_AS": memory, "RLIMIT_FSIZE": disk, "RLIMIT_CORE": 0})

    def _scratch_places(self) -> tuple[str, tuple[str, ...]]:
        # only the scratch folder the commands are pointed at: they run as you and can write anywhere you can
        return str(self.root), (str(self.root / SCRATCH),)

    async def _read_lines(self, stream: asyncio.StreamReader) -> None:
        try:
            while True:
                line = await stream.readline()
                if not line:
                    break
                assert self._link is not None
                self._link.feed_line(line)
        except (ConnectionError, ValueError):
            pass
        if self._link is not None:
            code = self._proc.returncode if self._proc else None
            self._link.closed(f"sandbox {self.id} was closed" if self.closed else
                              f"sandbox {self.id}: the agent process stopped (exit code {code}); start a new sandbox")

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._link is not None and self._link.dead is None and self._proc is not None:
            # the agent kills every process below it (background jobs too, detached or not)
            with contextlib.suppress(Exception):
                await self._link.call("shutdown", wait=10)
        self._disconnect()
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, 9)
            try:
                await asyncio.wait_for(self._proc.wait(), 5)
            except TimeoutError:
                raise SandboxError(f"local sandbox {self.id} did not stop") from None
        await asyncio.to_thread(shutil.rmtree, self.root, True)
