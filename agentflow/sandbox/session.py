"""`AgentSandbox`: the `Sandbox` operations, spoken to the in-sandbox agent over one JSON-lines stream.

Backends (docker, local) only differ in how they start the agent and carry its byte stream; everything a
sandbox can do lives here. Many requests may be in flight on one sandbox at once (the agent runs each in a
thread); replies are matched to requests by id.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import io
import itertools
import json
import os
import secrets
import shlex
import tarfile
import time
from collections.abc import Awaitable, Coroutine
from importlib import resources as _res
from pathlib import Path
from typing import Any, Self

from agentflow.errors import SandboxError
from agentflow.events.kinds import SandboxExec, SandboxStart, SandboxTamper
from agentflow.sandbox.base import ExecResult, FileEntry, SandboxInfo
from agentflow.sandbox.config import SandboxConfig

# The command line that boots the agent: read N bytes of source from stdin, run it.
BOOT = (
    "import sys;n=int(sys.stdin.buffer.readline());"
    "exec(compile(sys.stdin.buffer.read(n),'agentflow-agent','exec'),{'__name__':'__main__'})"
)


def boot_payload() -> bytes:
    """What the agent's stdin gets first: the length of agent.py's source, then the source."""
    src = _res.files("agentflow.sandbox").joinpath("agent.py").read_bytes()
    return f"{len(src)}\n".encode() + src


class AgentLink:
    """Request/reply over the agent's stream. `feed_line` is called by the backend's reader task.

    From the `hello` request on, replies must carry an HMAC under `key` (a per-sandbox secret); lines that do
    not verify are dropped and counted in `tampered` (see agent.py for why the stream needs it)."""

    def __init__(self, write: Any, on_tamper: Any = None) -> None:
        self._write = write  # async (bytes) -> None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.dead: str | None = None
        """Why the stream ended (None while it serves)."""
        self._write_lock = asyncio.Lock()
        self.key = secrets.token_bytes(32)
        self._signed = False
        self.tampered = 0
        """Reply lines that failed verification (a sandboxed process tried to speak for the agent)."""
        self.on_tamper = on_tamper  # (line: bytes) -> None

    def expect_signed(self) -> None:
        """From now on only signed lines count (called as the key goes out in `hello`)."""
        self._signed = True

    def _verify(self, line: bytes) -> bytes | None:
        mac, _, body = line.partition(b" ")
        want = hmac.new(self.key, body, hashlib.sha256).hexdigest().encode()
        return body if hmac.compare_digest(mac, want) else None

    def feed_line(self, line: bytes) -> None:
        line = line.strip()
        if not line:
            return
        if self._signed:
            body = self._verify(line)
            if body is None:
                self.tampered += 1
                if self.on_tamper is not None:
                    self.on_tamper(line)
                return
            line = body
        try:
            msg = json.loads(line)
        except ValueError:
            return
        if not isinstance(msg, dict):
            return
        rid = msg.get("id")
        fut = self._pending.pop(rid, None) if isinstance(rid, int) else None
        if fut is not None and not fut.done():
            fut.set_result(msg)

    def closed(self, reason: str) -> None:
        """The stream ended: fail every waiting request with `reason`."""
        if self.dead is None:
            self.dead = reason
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(SandboxError(self.dead))
        self._pending.clear()

    def waiting(self) -> list[int]:
        """Ids of the requests sent and not yet answered (nor given up on)."""
        return list(self._pending)

    async def call(self, op: str, wait: float | None = None, **fields: Any) -> dict[str, Any]:
        if self.dead is not None:
            raise SandboxError(self.dead)
        rid = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        data = (json.dumps({"id": rid, "op": op, **fields}) + "\n").encode()
        try:
            async with self._write_lock:
                await self._write(data)
        except (OSError, ConnectionError) as exc:
            self._pending.pop(rid, None)
            self.closed(f"sandbox agent stream closed ({exc.__class__.__name__})")
            raise SandboxError(self.dead or "sandbox agent stream closed") from None
        try:
            msg = await asyncio.wait_for(fut, wait)
        except TimeoutError:
            raise SandboxError(f"sandbox agent did not answer a {op!r} request within {wait:.0f}s") from None
        finally:
            # answered, timed out or cancelled: no longer waited for, so `end_processes` spares it no more
            self._pending.pop(rid, None)
        if not msg.get("ok"):
            raise _AgentFailure(msg.get("error", "unknown error"), msg.get("kind"))
        return msg


class NoSpaceError(SandboxError):
    """A snapshot operation ran out of space (the store, the workspace or the index is full)."""


_NO_SPACE = "No space left on device"


class _AgentFailure(SandboxError):
    def __init__(self, message: str, kind: str | None) -> None:
        super().__init__(message)
        self.kind = kind


EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
"""git's id of the empty tree: the scratch places of a backend that has none."""


def _add_tree_script(root: str, specs: list[str], index: str) -> str:
    """Shell that stages the files under `specs` (relative to `root`) into the snapshot index `index` and prints
    their tree. When git reports anything, what a command closed is opened (by the same user, its owner) and the
    files staged again: git keeps the index entry of a file it cannot read, so a closed file would be saved with
    the content it had before. --ignore-errors: what is left unreadable (not the command user's) is left out,
    but a full store is a failure."""
    paths = " ".join(shlex.quote(spec) for spec in specs)
    found = " ".join(shlex.quote(os.path.normpath(os.path.join(root, spec))) for spec in specs)
    add = f"git -C {shlex.quote(root)} add -A -f --ignore-errors -- {paths} 2>&1"
    return (
        f"export GIT_INDEX_FILE={shlex.quote(index)} GIT_WORK_TREE={shlex.quote(root)}; e=$({add}); "
        f'if [ -n "$e" ]; then find {found} \\( -type d \\( ! -readable -o ! -writable -o ! -executable \\) '
        "-o ! -type d ! -type l ! -readable \\) -exec chmod u+rwX {} \\; 2>/dev/null; "
        f"e=$({add}); fi; "
        f'case "$e" in *"{_NO_SPACE}"*) echo "$e" >&2; exit 1;; esac; git write-tree'
    )


class AgentSandbox:
    """A `Sandbox` backed by an agent process; subclasses start it and provide the transport."""

    backend = "agent"
    private_ipc = False
    """Whether the sandbox has an IPC namespace of its own (its System V IPC objects are its commands' alone)."""

    def __init__(
        self, sandbox_id: str, config: SandboxConfig, workdir: str, snap_dir: str, store_dir: str
    ) -> None:
        self.id = sandbox_id
        self.config = config
        self.workdir = workdir
        self._snap_dir = snap_dir
        self._store_dir = store_dir
        self._link: AgentLink | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._reader: asyncio.Task[None] | None = None
        self._started = time.monotonic()
        self._base: str | None = None
        self._snap_ready = False
        # One snapshot operation at a time: each stages into or reads the snapshot index (`git add -A`,
        # read-tree), and two at once (a node's diff and the checkpoint's, graph/run/history.py) would race for
        # its lock file.
        self._git_lock = asyncio.Lock()
        self._snapshots: set[str] = set()
        """Snapshot ids whose objects are in this sandbox's own store."""
        self._taken: set[str] = set()
        """Snapshot ids taken here (not imported): the first place to fetch one from."""
        self.peer_fetch: Any = None
        """async (snapshot_id, receiver) -> None: copies a snapshot taken elsewhere into the receiver (SandboxPool)."""
        self.closed = False
        self.agent_dumpable = True
        """False once the agent confirmed it made itself non-dumpable (its /proc entries closed to commands)."""
        self.store_gid: int | None = None
        """The group the agent runs snapshot operations in, which commands are never in (None: commands and
        snapshot operations run as one identity, as in the local backend)."""
        self.events: Any = None
        """An `EventLog` to record `sandbox.start`/`sandbox.exec` to (set by open_sandbox/SandboxPool)."""

    # -- lifecycle hooks for backends --------------------------------------------------------------------------
    @property
    def link(self) -> AgentLink:
        if self._link is None:
            raise SandboxError(f"sandbox {self.id} is not started")
        return self._link

    async def _start_or_close(self, start: Awaitable[None]) -> Self:
        """This sandbox once `start` (the backend's start-up) is done; closed when it fails."""
        try:
            await start
        except BaseException:
            await self.close()
            raise
        return self

    async def _connect(self, writer: asyncio.StreamWriter, read_replies: Coroutine[Any, Any, None]) -> None:
        """Link to the agent through `writer` (its replies are fed to the link by `read_replies`, run as a
        task) and send it its source."""

        async def write(data: bytes) -> None:
            writer.write(data)
            await writer.drain()

        self._writer = writer
        self._link = AgentLink(write)
        self._reader = asyncio.create_task(read_replies)
        await write(boot_payload())

    def _disconnect(self) -> None:
        """Fail what still waits for the agent, and stop talking to it."""
        if self._link is not None:
            self._link.closed(f"sandbox {self.id} was closed")
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        if self._reader is not None:
            self._reader.cancel()

    async def _hello(self, rlimits: dict[str, int] | None = None) -> None:
        link = self.link
        link.on_tamper = self._tamper
        link.expect_signed()
        reply = await link.call(
            "hello",
            wait=30,
            workdir=self.workdir,
            env=self.config.env,
            rlimits=rlimits or {},
            output_limit=self.config.output_limit_bytes,
            output_kill=self.config.output_kill_bytes,
            key=link.key.hex(),
        )
        self.agent_dumpable = bool(reply.get("dumpable", True))
        self.store_gid = reply.get("store_gid")

    def _tamper(self, line: bytes) -> None:
        # loud, not fatal: the forged line is dropped and the real reply still arrives
        if self.events is not None:
            self.events.write(SandboxTamper(sandbox=self.id, line=line[:200].decode("utf-8", "replace")))

    def healthy(self) -> bool:
        return not self.closed and self._link is not None and self._link.dead is None

    def remaining_s(self) -> float:
        return self.config.sandbox_timeout_s - (time.monotonic() - self._started)

    def out_of_time(self) -> str:
        """Why the sandbox serves no more: its wall-clock limit was reached."""
        return (
            f"sandbox {self.id} reached its wall-clock limit of {self.config.sandbox_timeout_s:.0f}s "
            "(raise sandbox_timeout_s or start a new sandbox)"
        )

    # -- Sandbox protocol --------------------------------------------------------------------------------------
    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        stdin: str | None = None,
        timeout: float | None = None,
        side_channel: bool = False,
    ) -> ExecResult:
        """Run `command` in the workspace. With `side_channel`, the command gets a pipe whose fd number is in
        `$AGENTFLOW_RESULTS_FD`; what it writes there comes back as `ExecResult.results`, carried by the
        agent's signed replies (used for test outcomes: no file in the workspace is trusted for them)."""
        fields = {"cwd": cwd, "env": env or {}, "stdin": stdin, **({"results_fd": True} if side_channel else {})}
        return await self._exec(command, timeout, fields)

    async def _exec(
        self, command: str, timeout: float | None = None, fields: dict[str, Any] | None = None, *, store: bool = False
    ) -> ExecResult:
        """`exec` with the request's other `fields` (cwd, env, stdin...); with `store`, as the host's snapshot
        operation (in the one group that can enter the snapshot index and store)."""
        limit = float(timeout if timeout is not None else self.config.command_timeout_s)
        left = self.remaining_s()
        if left <= 0:
            raise SandboxError(self.out_of_time())
        limit = max(min(limit, left), 0.01)
        msg = await self.link.call(
            "exec", wait=limit + 30, command=command, timeout=limit, **(fields or {}), **({"store": True} if store else {})
        )
        result = ExecResult.model_validate(msg)  # the reply's other fields (id, ok) are ignored
        if self.events is not None:
            self.events.write(SandboxExec(
                sandbox=self.id, command=_shown(command), exit_code=result.exit_code,
                duration_s=round(result.duration_s, 4), timed_out=result.timed_out, limit_hit=result.limit_hit,
                truncated=result.truncated,
            ))
        return result

    def attach_events(self, events: Any) -> None:
        """Record this sandbox's effective settings (`sandbox.start`) and its commands to `events`."""
        self.events = events
        if events is not None:
            from agentflow.secrets import _SECRET_ENV, register_secret

            for key, value in self.config.env.items():
                if _SECRET_ENV.search(key):
                    register_secret(value)
            events.write(SandboxStart(sandbox=self.id, **self.info().model_dump()))

    async def _exec_argvs(
        self, argvs: list[list[str]], env: dict[str, str], what: str, op: str = "exec", **fields: Any
    ) -> str:
        """Run argvs in turn without a shell (stop at the first failure); stdout of the last one. Used by
        snapshot and restore, which share the snapshot index with `_git`: one of them at a time. `op` and
        `fields`: another request that runs `argvs` as `exec` does (`wipe`)."""
        async with self._git_lock:
            msg = await self.link.call(
                op, wait=150, command="", argvs=argvs, cwd=self.workdir, env=env, stdin=None, timeout=120,
                store=True, **fields,
            )
        if msg["exit_code"] != 0:
            raise await self._snap_failure(what, msg.get("stdout", "") + msg.get("stderr", ""))
        return str(msg.get("stdout", "")).strip()

    async def _file_call(self, op: str, path: str, **fields: Any) -> dict[str, Any]:
        """A file request (`read`, `write`, `list`) on `path`; a failure names the path and what went wrong."""
        try:
            return await self.link.call(op, wait=60, path=path, **fields)
        except _AgentFailure as exc:
            raise SandboxError(f"{path}: {_FILE_ERRORS.get(exc.kind or '', exc)}") from None

    async def read_bytes(self, path: str) -> bytes:
        return base64.b64decode((await self._file_call("read", path))["data"])

    async def read_file(self, path: str) -> str:
        return (await self.read_bytes(path)).decode("utf-8", "replace")

    async def write_file(self, path: str, content: str | bytes, *, mode: int | None = None) -> None:
        data = content.encode() if isinstance(content, str) else content
        await self._file_call("write", path, data=base64.b64encode(data).decode(), mode=mode)

    async def list_files(self, path: str = ".", recursive: bool = False) -> list[FileEntry]:
        msg = await self._file_call("list", path, recursive=recursive)
        return [FileEntry(**e) for e in msg["entries"]]

    async def upload(self, source: str | Path, dest: str = ".") -> int:
        """Copy a host file or directory tree into the sandbox (under `dest`); returns the entry count."""
        src = Path(source)
        if not src.exists():
            raise SandboxError(f"{src}: no such file or directory on the host")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
            if src.is_dir():
                for child in sorted(src.iterdir()):
                    tar.add(child, arcname=child.name)
            else:
                tar.add(src, arcname=src.name)
        msg = await self.link.call("untar", wait=300, dest=dest, data=base64.b64encode(buf.getvalue()).decode())
        return int(msg["count"])

    async def apply_patch(self, diff: str) -> ExecResult:
        if not diff.endswith("\n"):
            diff += "\n"
        script = (
            'f=$(mktemp); cat > "$f"; '
            'if git apply --check --whitespace=nowarn "$f" 2>/dev/null; then git apply --whitespace=nowarn -v "$f"; '
            'elif patch -p1 --dry-run --batch --forward -s < "$f" >/dev/null 2>&1; then patch -p1 --batch --forward < "$f"; '
            "else echo 'patch does not apply:' >&2; git apply --check -v \"$f\" >&2; rc=1; fi; "
            'rm -f "$f"; exit ${rc:-0}'
        )
        return await self.exec(script, stdin=diff, timeout=60)

    async def end_processes(self) -> int:
        """End every process in the sandbox but its agent and the commands still running for this host (those
        a caller awaits now: a concurrent diff's git, say). Background jobs go, whether they detached (nohup,
        setsid, a double fork) or not: every orphan is the agent's (PID 1 in Docker, a child subreaper
        locally), so none is out of its reach. How many processes were ended."""
        msg = await self.link.call("end_processes", wait=30, spare=self.link.waiting())
        return int(msg.get("ended", 0))

    def _snap_env(self) -> dict[str, str]:
        return {
            "GIT_DIR": self._snap_dir, "GIT_WORK_TREE": self.workdir,
            "GIT_OBJECT_DIRECTORY": f"{self._store_dir}/objects", "GIT_CONFIG_NOSYSTEM": "1",
            # nothing from the commands' HOME or XDG folders (config, attributes): git reads only our own config
            "GIT_CONFIG_GLOBAL": "/dev/null", "HOME": self._snap_dir, "XDG_CONFIG_HOME": self._snap_dir,
            "GIT_AUTHOR_NAME": "agentflow", "GIT_AUTHOR_EMAIL": "agentflow@localhost",
            "GIT_COMMITTER_NAME": "agentflow", "GIT_COMMITTER_EMAIL": "agentflow@localhost",
            "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
        }

    async def _git(self, script: str, what: str) -> str:
        init = (
            ""
            if self._snap_ready
            else (
                f"mkdir -p {shlex.quote(self._store_dir)}/objects && "
                f"{{ [ -f {shlex.quote(self._snap_dir)}/HEAD ] || env -u GIT_DIR -u GIT_WORK_TREE git init -q --bare {shlex.quote(self._snap_dir)}; }} && "
                f"git config core.bare false && git config core.excludesFile /dev/null && "
                f"git config gc.auto 0 && git config core.untrackedCache true && "
                f"git config core.attributesFile /dev/null; "
                f"mkdir -p {shlex.quote(self._snap_dir)}/info && echo '.git' > {shlex.quote(self._snap_dir)}/info/exclude; "
            )
        )
        async with self._git_lock:
            res = await self._exec(init + script, 120, {"env": self._snap_env(), "cwd": self.workdir}, store=True)
        if not res.ok:
            raise await self._snap_failure(what, res.output)
        self._snap_ready = True
        # only the final newlines go: a diff's last line may be a blank context line (" "), which it needs
        return res.stdout.rstrip("\n")

    def _space_settings(self) -> dict[str, str]:
        """{path: the setting that sizes the filesystem there}; a backend whose places have a size says so."""
        return {}

    async def _snap_failure(self, what: str, output: str) -> SandboxError:
        """The error of a failed snapshot operation; when it ran out of space, the place that is full and the
        setting to raise (the store and the workspace are size-limited: a full one must not read as a bug)."""
        if _NO_SPACE not in output:
            return SandboxError(f"{what} failed in sandbox {self.id}: {output.strip()[-500:]}")
        places = {
            self._store_dir: "the snapshot store",
            self.workdir: "the workspace",
            str(Path(self._snap_dir).parent): "the snapshot index",
        }
        probe = "; ".join(f"stat -f -c '%a %S' {shlex.quote(p)} 2>/dev/null || echo '-1 1'" for p in places)
        lines = (await self._exec(probe, 30, store=True)).stdout.splitlines()
        sizes = self._space_settings()
        for (path, name), line in zip(places.items(), lines, strict=False):
            blocks, _, size = line.partition(" ")
            if blocks.lstrip("-").isdigit() and size.isdigit() and 0 <= int(blocks) * int(size) < 1 << 20:
                setting = sizes.get(path)  # less than 1 MiB left: this one is full
                where = f"{path}, {setting}" if setting else path
                also = f", raise {setting.split('=')[0]}" if setting else ""
                return NoSpaceError(
                    f"{what} failed in sandbox {self.id}: {name} is full ({where}); "
                    f"free space there{also} or start a new sandbox"
                )
        return NoSpaceError(f"{what} failed in sandbox {self.id}: no space left on device: {output.strip()[-300:]}")

    async def _ensure_snap(self) -> None:
        if not self._snap_ready:
            await self._git("true", "preparing snapshots")

    async def snapshot(self) -> str:
        await self._ensure_snap()
        sid = await self._exec_argvs(
            [["git", "add", "-A", "-f", "."], ["git", "write-tree"]], self._snap_env(), "snapshot"
        )
        return self._took(sid)

    def _took(self, sid: str) -> str:
        """Record snapshot `sid` as taken here (the first one is the base `diff()` compares against)."""
        if self._base is None:
            self._base = sid
        self._snapshots.add(sid)
        self._taken.add(sid)
        return sid

    async def snapshot_branch(self) -> tuple[str, str]:
        """(a snapshot of the workspace, a tree of what else the branch keeps) in one round trip: what a search
        branch keeps of the sandbox (graph/search/workspace.py). Besides the workspace, a branch keeps the
        scratch places, every place outside the workspace where commands can keep files (`_scratch_places`), and
        the workspace's own `.git` folder, which the workspace snapshot leaves out (its hooks, config and
        attributes are commands the next branch's git would run). What git cannot keep as a file (a socket, a
        FIFO, an empty folder, a `.git` folder inside them, a workspace `.git` that is not a folder) is not kept,
        and `restore_scratch` leaves none of it behind either."""
        await self._ensure_snap()
        script = f"git add -A -f . && git write-tree && {self._scratch_save_script()}"
        out = await self._exec_argvs([["sh", "-c", script]], self._snap_env(), "snapshot")
        sid, _, scratch = out.partition("\n")
        return self._took(sid), scratch.strip()

    async def save_scratch(self) -> str:
        """A tree of the scratch places and the workspace's `.git` folder (see `snapshot_branch`)."""
        await self._ensure_snap()
        return await self._exec_argvs([["sh", "-c", self._scratch_save_script()]], self._snap_env(), "saving scratch")

    def _scratch_save_script(self) -> str:
        """Shell that prints one tree: `scratch`, the files of the scratch places, and `gitdir`, the files of the
        workspace's `.git` folder when it is a folder (no `gitdir`: there is none to put back)."""
        root, places = self._scratch_places()
        gitdir = shlex.quote(self._gitdir())
        scratch = (
            _add_tree_script(root, [os.path.relpath(p, root) for p in places], f"{self._snap_dir}/scratch-index")
            if places
            else f"echo {EMPTY_TREE}"
        )
        tree_of_gitdir = _add_tree_script(self._gitdir(), ["."], f"{self._snap_dir}/gitdir-index")
        return (
            f"s=$( {scratch} ) || exit 1; "
            f"if [ -d {gitdir} ] && [ ! -L {gitdir} ]; then g=$( {tree_of_gitdir} ) || exit 1; "
            f"printf '040000 tree %s\\tgitdir\\n040000 tree %s\\tscratch\\n' \"$g\" \"$s\" | git mktree; "
            f"else printf '040000 tree %s\\tscratch\\n' \"$s\" | git mktree; fi"
        )

    def _gitdir(self) -> str:
        return os.path.join(self.workdir, ".git")

    async def restore_scratch(self, tree: str) -> None:
        """Make the scratch places and the workspace's `.git` folder hold exactly the files of `tree` (from
        `save_scratch`/`snapshot_branch`): the agent empties the scratch places (every entry, whatever its kind
        or mode) and the places that cannot be kept as files (`_wiped_places`, System V IPC objects), then git
        writes their files and makes the `.git` folder the tree's (or removes it), in one round trip."""
        if not all(c in "0123456789abcdef" for c in tree) or len(tree) != 40:
            raise SandboxError(f"{tree!r} is not a scratch tree id")
        await self._ensure_snap()
        root, places = self._scratch_places()
        env = {**self._snap_env(), "GIT_INDEX_FILE": f"{self._snap_dir}/scratch-index", "GIT_WORK_TREE": root}
        put_back = (
            f'git read-tree "$1:scratch" && git -C {shlex.quote(root)} checkout-index -a -f && ' if places else ""
        )
        argvs = [["sh", "-c", f"{put_back}{self._gitdir_restore_script()}", "restore", tree]]
        wiped = [*places, *self._wiped_places()]
        await self._exec_argvs(argvs, env, "restoring scratch", "wipe", paths=wiped, ipc=self.private_ipc)

    def _gitdir_restore_script(self) -> str:
        """Shell that makes the workspace's `.git` folder hold exactly the files of `$1:gitdir` (git rewrites
        only the files that changed since the last save, by their inode and change time, which a command cannot
        set), or removes it when the tree has none. Folders a command closed are opened first; `refs` and
        `objects`, which git needs to see a repository, are kept even when empty (git keeps no empty folder)."""
        g = shlex.quote(self._gitdir())
        index = shlex.quote(f"{self._snap_dir}/gitdir-index")
        return (
            f"if [ -d {g} ] && [ ! -L {g} ]; then find {g} -type d ! -perm -u=rwx -exec chmod u+rwx {{}} \\; || exit 1; "
            f"elif [ -e {g} ] || [ -L {g} ]; then rm -f {g} || exit 1; fi; "
            f'if git cat-file -e "$1:gitdir" 2>/dev/null; then '
            f"mkdir -p {g} && cd {g} && export GIT_INDEX_FILE={index} GIT_WORK_TREE={g} && "
            f'git read-tree --reset -u "$1:gitdir" && git clean -ffdxq && mkdir -p refs objects; '
            f"else rm -rf {g}; fi"
        )

    def _scratch_places(self) -> tuple[str, tuple[str, ...]]:
        """(a folder, the scratch places under it): every place outside the workspace where the sandbox's
        commands can keep files. A backend whose commands can write elsewhere says so in its docs."""
        return "/", ()

    def _wiped_places(self) -> tuple[str, ...]:
        """Places outside the workspace where commands can leave entries that are not files `save_scratch`
        can keep (message queues): emptied at each `restore_scratch`."""
        return ()

    async def restore(self, snapshot_id: str) -> None:
        _check_snapshot_id(snapshot_id)
        await self._ensure_snap()
        if snapshot_id not in self._snapshots and self.peer_fetch is not None:
            # taken in another sandbox: its objects come over as a pack, and git here names every object by
            # hashing its content, so the other sandbox cannot substitute different files for this id
            await self.peer_fetch(snapshot_id, self)
        await self._exec_argvs(
            [["git", "read-tree", "-u", "--reset", snapshot_id], ["git", "clean", "-fdxq", "-e", ".git"]],
            self._snap_env(),
            "restore",
        )
        if self._base is None:
            self._base = snapshot_id

    async def export_snapshot(self, snapshot_id: str, have: list[str] | tuple[str, ...] = ()) -> bytes:
        """The objects of a snapshot taken here, as a git pack for `import_snapshot` in another sandbox;
        without the objects of the `have` snapshots (ones the receiver holds already), so a fork from a shared
        base carries only what changed."""
        await self._ensure_snap()
        ids = " ".join(shlex.quote(h) for h in have if h != snapshot_id)
        script = (
            f"git rev-list --objects {shlex.quote(snapshot_id)}{' --not ' + ids if ids else ''} "
            "| cut -d' ' -f1 | git pack-objects --stdout -q | base64 -w0"
        )
        msg = await self.link.call(
            "exec", wait=150, command=script, cwd=self.workdir, env=self._snap_env(), stdin=None,
            timeout=120, output_limit=1 << 30, store=True,
        )
        if msg["exit_code"] != 0 or msg.get("truncated"):
            raise SandboxError(f"exporting snapshot {snapshot_id} failed in sandbox {self.id}")
        return base64.b64decode(msg.get("stdout", ""))

    async def import_snapshot(self, snapshot_id: str, pack: bytes) -> None:
        """Unpack another sandbox's snapshot objects into this sandbox's own store (git verifies them)."""
        await self._ensure_snap()
        res = await self._exec(
            f"base64 -d | git unpack-objects -q && git cat-file -e {shlex.quote(snapshot_id)}^{{tree}}", 120,
            {"env": self._snap_env(), "stdin": base64.b64encode(pack).decode(), "cwd": self.workdir}, store=True,
        )
        if not res.ok:
            if _NO_SPACE in res.output:
                raise await self._snap_failure(f"importing snapshot {snapshot_id}", res.output)
            raise SandboxError(f"snapshot {snapshot_id} could not be imported into sandbox {self.id}")
        self._snapshots.add(snapshot_id)

    @property
    def base(self) -> str | None:
        """The snapshot `diff()` compares against (None until set or first diffed)."""
        return self._base

    async def set_base(self, snapshot_id: str | None = None) -> str:
        """Make `snapshot_id` (default: the current state) the base `diff()` compares against."""
        self._base = snapshot_id or await self.snapshot()
        return self._base

    async def diff(self, base: str | None = None) -> str:
        if base is None:
            base = self._base or await self.set_base()
        return await self._git(
            f"git add -A -f . >/dev/null && git diff --cached --no-color --no-ext-diff {shlex.quote(base)}",
            "diff",
        )

    async def diff_snapshots(self, base: str, snapshot_id: str) -> str:
        """The changes from snapshot `base` to snapshot `snapshot_id`, read from the snapshot store alone:
        the workspace's files are not touched (a search records a branch's changes this way while another
        branch works in the sandbox)."""
        _check_snapshot_id(base)
        _check_snapshot_id(snapshot_id)
        return await self._git(
            f"git diff --no-color --no-ext-diff {shlex.quote(base)} {shlex.quote(snapshot_id)}", "diff"
        )

    def _reset_script(self) -> str:
        """Shell that empties the workspace. The docker backend also clears /tmp and kills stray processes;
        the local backend must never touch anything outside its own temp directory."""
        return f"find {shlex.quote(self.workdir)} -mindepth 1 -maxdepth 1 -exec rm -rf {{}} + ; true"

    async def reset_workspace(self) -> None:
        """Empty the workspace (used by pools when a sandbox is handed back)."""
        res = await self._exec(self._reset_script(), 60, store=True)
        if not res.ok:
            raise SandboxError(f"could not reset sandbox {self.id}: {res.output.strip()[-300:]}")
        self._base = None
        self._snap_ready = False  # the docker reset empties /run/agentflow, where the snapshot index lives

    def info(self) -> SandboxInfo:
        return SandboxInfo(
            backend=self.backend,
            image=self.config.image if self.backend == "docker" else None,
            workdir=self.workdir,
            settings=self.config.effective(),
        )

    async def close(self) -> None:  # pragma: no cover - overridden
        self.closed = True

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


_FILE_ERRORS = {
    "FileNotFoundError": "no such file in the sandbox",
    "IsADirectoryError": "is a directory",
    "NotADirectoryError": "not a directory",
    "PermissionError": "permission denied in the sandbox",
}


def _check_snapshot_id(sid: str) -> None:
    if not all(c in "0123456789abcdef" for c in sid) or len(sid) < 7:
        raise SandboxError(f"{sid!r} is not a snapshot id (use the value returned by snapshot())")


def _shown(command: str, head: int = 300, tail: int = 700) -> str:
    """A command as the events record it: whole when short, else its start and its end (a test run's command
    starts with the environment it sets and ends with what it runs: both tell what happened)."""
    if len(command) <= head + tail:
        return command
    return f"{command[:head]} ... {command[-tail:]}"
