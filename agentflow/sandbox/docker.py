"""Docker backend: one hardened container per sandbox, its agent as the main process on an attached stream.

docker-py is imported lazily. How containers are labelled, watched and reaped: docs/concepts/sandboxes.md
("No leaks"); `prune` also removes the snapshot-store volumes that earlier versions created.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import struct
from typing import Any

from agentflow._process import pid_alive
from agentflow.errors import DependencyMissing, SandboxError, UserError
from agentflow.sandbox.config import SandboxConfig
from agentflow.sandbox.session import BOOT, AgentSandbox
from agentflow.sandbox.watchdog import ensure_watchdog

LABEL = "agentflow.sandbox"
SNAP_DIR = "/run/agentflow/snap"
STORE_DIR = "/var/lib/agentflow/store"
_RUN_MB = 64  # /run/agentflow: the snapshot index and refs
_SHM_MB = 64  # /dev/shm (Docker's default size, stated so that it is counted in the memory limit)
STORE_GID = 64999
"""The group that alone can enter the snapshot index and store: the agent's snapshot operations run in it, the
commands a model runs never do (agent.py, "who commands run as")."""
SCRATCH_PLACES = ("/tmp", "/dev/shm")
"""Every place outside the workspace where commands can keep files (the rest of the root is read-only, the
snapshot index and store are closed to them): kept per search branch (`AgentSandbox.save_scratch`)."""
WIPED_PLACES = ("/dev/mqueue",)
"""Writable places whose entries cannot be kept as files (POSIX message queues): emptied at each switch."""
_client_cache: Any = None
_reaped = False


def docker_client() -> Any:
    """A docker-py client, or a one-line UserError saying how to get one."""
    global _client_cache
    if _client_cache is not None:
        return _client_cache
    try:
        import docker
    except ImportError:
        raise DependencyMissing("docker", "docker", "the docker sandbox backend") from None
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - DockerException and connection errors alike
        raise UserError(
            f"cannot reach the Docker engine ({exc.__class__.__name__})",
            hint="start Docker (e.g. 'sudo systemctl start docker'), check DOCKER_HOST, or use --sandbox local",
        ) from None
    _client_cache = client
    return client


def docker_available() -> bool:
    try:
        docker_client()
        return True
    except UserError:
        return False


def _owner_gone(labels: dict[str, str], host: str) -> bool:
    if labels.get(f"{LABEL}.host") != host:
        return False  # another machine's: its owner cannot be checked from here
    try:
        pid = int(labels.get(f"{LABEL}.pid", "0"))
    except ValueError:
        pid = 0
    return not (pid and pid_alive(pid))


def reap_orphans(client: Any | None = None) -> list[str]:
    """Remove sandbox containers/volumes whose owning process (on this host) is gone."""
    return prune(client)


def prune(client: Any | None = None, *, everything: bool = False) -> list[str]:
    """Remove orphaned sandbox containers and store volumes (their owner process is gone); with
    `everything`, every agentflow sandbox, including those of runs still going."""
    client = client or docker_client()
    removed = []
    host = socket.gethostname()
    # as the engine lists them, with no per-item inspect: one that goes away meanwhile, as auto-removed
    # containers do, cannot fail the listing
    for c in client.api.containers(all=True, filters={"label": LABEL}):
        labels = c.get("Labels") or {}
        orphan = labels.get(f"{LABEL}.host") == host and (_owner_gone(labels, host) or c.get("State") == "exited")
        if everything or orphan:
            with contextlib.suppress(Exception):
                client.api.remove_container(c["Id"], force=True)
                removed.append((c.get("Names") or [c["Id"]])[0].lstrip("/"))
    for v in (client.api.volumes(filters={"label": LABEL}) or {}).get("Volumes") or []:
        if everything or _owner_gone(v.get("Labels") or {}, host):
            with contextlib.suppress(Exception):
                client.api.remove_volume(v["Name"], force=True)
                removed.append(v["Name"])
    return removed


def separates_store(config: SandboxConfig) -> bool:
    """Whether commands run apart from the snapshot store: always, unless they run as root (`user: "0"`), whose
    commands could enter it anyway."""
    return config.user.partition(":")[0] not in ("", "0")


def container_settings(config: SandboxConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """(create_container kwargs, host_config kwargs) for `config`: the hardening lives here."""
    uid, _, gid = config.user.partition(":")
    owner = f"uid={uid or 0},gid={gid or uid or 0}"
    # the container starts as root only so that its agent can become the command user with the two capabilities
    # it needs to start commands and snapshot operations as different identities (agent.py)
    separated = separates_store(config)
    if separated and (gid or uid) == str(STORE_GID):
        raise UserError(f"sandbox user {config.user}: gid {STORE_GID} is the snapshot store's own", hint="use 1000:1000")
    store_owner = f"uid=0,gid={STORE_GID}" if separated else owner
    run_as = {"AGENTFLOW_RUN_AS": f"{uid}:{gid or uid}:{STORE_GID}:/run/agentflow:{STORE_DIR}"} if separated else {}
    # tmpfs pages are charged to the container's memory cgroup: the limit is memory_mb for processes plus the
    # tmpfs sizes, so a full workspace cannot starve later commands (they would all die as "memory")
    tmpfs_mb = config.workspace_size_mb + config.tmp_size_mb + config.store_size_mb + _RUN_MB + _SHM_MB
    memory = config.memory_mb + tmpfs_mb
    create: dict[str, Any] = {
        "image": config.image,
        "command": ["python3", "-u", "-c", BOOT],
        "stdin_open": True,
        "tty": False,
        "detach": True,
        "user": "0:0" if separated else config.user,
        "working_dir": config.workdir,
        # no user site: a `usercustomize.py` or `.pth` under HOME would run in every later Python (HOME and TMPDIR
        # are in /tmp, which a search branch keeps as its own, but a sandbox has other users than branches)
        "environment": {"HOME": "/tmp", "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
                        "LANG": "C.UTF-8", **run_as},
        "labels": {LABEL: "1", f"{LABEL}.pid": str(os.getpid()), f"{LABEL}.host": socket.gethostname()},
        "network_disabled": not config.network,
    }
    host: dict[str, Any] = {
        "auto_remove": True,
        "read_only": config.read_only_root,
        "network_mode": "bridge" if config.network else "none",
        "cap_drop": config.cap_drop or None,
        "cap_add": sorted({*config.cap_add, *(("SETUID", "SETGID") if separated else ())}) or None,
        "security_opt": ["no-new-privileges:true"] if config.no_new_privileges else None,
        "pids_limit": config.pids_limit,
        "mem_limit": f"{memory}m",
        "memswap_limit": f"{memory}m",
        "shm_size": f"{_SHM_MB}m",
        "nano_cpus": int(config.cpus * 1e9),
        "tmpfs": {
            config.workdir: f"rw,exec,nosuid,nodev,size={config.workspace_size_mb}m,mode=0755,{owner}",
            "/tmp": f"rw,exec,nosuid,nodev,size={config.tmp_size_mb}m,mode=1777",
            # the snapshot index and objects: root's, open to the store's group alone, so no command a model runs
            # can read or write them; held in memory under a cap like the workspace, never on the host's disk
            "/run/agentflow": f"rw,nosuid,nodev,noexec,size={_RUN_MB}m,mode=0770,{store_owner}",
            STORE_DIR: f"rw,nosuid,nodev,noexec,size={config.store_size_mb}m,mode=0770,{store_owner}",
        },
    }
    return create, host


class DockerSandbox(AgentSandbox):
    """A sandbox in a hardened Docker container. Start with `await DockerSandbox.start(config)`."""

    backend = "docker"
    private_ipc = True

    def __init__(self, config: SandboxConfig) -> None:
        super().__init__(f"sbx-{secrets.token_hex(5)}", config, config.workdir, SNAP_DIR, STORE_DIR)
        self._container: Any = None
        self._sock: Any = None
        self._keep: Any = None
        self._deadline: asyncio.TimerHandle | None = None
        self._stderr_tail = bytearray()

    @classmethod
    async def start(cls, config: SandboxConfig | None = None) -> DockerSandbox:
        config = config or SandboxConfig()
        client = await asyncio.to_thread(docker_client)
        ensure_watchdog(LABEL, socket.gethostname())
        global _reaped
        if not _reaped:
            _reaped = True
            await asyncio.to_thread(reap_orphans, client)
        sb = cls(config)
        return await sb._start_or_close(sb._start(client))

    async def _start(self, client: Any) -> None:
        import docker.errors

        create, host = container_settings(self.config)

        def make() -> Any:
            cfg = client.api.create_container_config(
                host_config=client.api.create_host_config(**host), **create
            )
            cfg["StdinOnce"] = True  # the host going away closes stdin: the agent exits, the container goes
            created = client.api.create_container_from_config(cfg, name=self.id)
            return client.containers.get(created["Id"])

        try:
            self._container = await asyncio.to_thread(make)
        except docker.errors.ImageNotFound:
            raise UserError(
                f"sandbox image {self.config.image} is not built", hint="run 'agentflow sandbox build'"
            ) from None
        except docker.errors.APIError as exc:
            raise UserError(f"docker refused the sandbox settings: {exc.explanation or exc}") from None

        def attach_and_start() -> Any:
            raw = client.api.attach_socket(
                self._container.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            self._container.start()
            return raw

        self._keep = await asyncio.to_thread(attach_and_start)
        sock = getattr(self._keep, "_sock", self._keep)
        sock.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=sock)
        await self._connect(writer, self._read_frames(reader))
        await self._hello()
        if separates_store(self.config) and self.store_gid != STORE_GID:
            raise SandboxError(
                f"sandbox {self.id}: the agent could not run commands apart from the snapshot store "
                "(CAP_SETUID/CAP_SETGID refused?); check the Docker engine's security options"
            )
        self._deadline = asyncio.get_running_loop().call_later(self.config.sandbox_timeout_s, self._wall_clock_hit)

    async def _read_frames(self, reader: asyncio.StreamReader) -> None:
        buf = bytearray()
        try:
            while True:
                header = await reader.readexactly(8)
                kind, size = struct.unpack(">BxxxL", header)
                payload = await reader.readexactly(size)
                if kind == 1 and self._link is not None:
                    *lines, rest = bytes(buf + payload).split(b"\n")
                    buf = bytearray(rest)
                    for line in lines:
                        self._link.feed_line(line)
                elif kind != 1:
                    self._stderr_tail = (self._stderr_tail + payload)[-2000:]
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            if self._link is not None:
                self._link.closed(f"sandbox {self.id} was closed")
            raise
        reason = await self._exit_reason()
        if self._link is not None:
            self._link.closed(reason)

    async def _exit_reason(self) -> str:
        if self.closed:
            return f"sandbox {self.id} was closed"
        if self.remaining_s() <= 0:
            return self.out_of_time()
        detail = ""
        try:
            attrs = await asyncio.to_thread(
                lambda: self._container.client.api.inspect_container(self._container.id)
            )
            state = attrs.get("State", {})
            if state.get("OOMKilled"):
                detail = " (out of memory: raise memory_mb)"
            elif state.get("ExitCode") is not None:
                detail = f" (exit code {state.get('ExitCode')})"
        except Exception:  # noqa: BLE001 - inspecting a dying container may fail any way
            detail = " (container is gone)"
        tail = self._stderr_tail.decode("utf-8", "replace").strip().splitlines()
        last = f": {tail[-1][:200]}" if tail else ""
        return f"sandbox {self.id}: the in-container agent stopped{detail}{last}; start a new sandbox"

    def _wall_clock_hit(self) -> None:
        if not self.closed:
            if self._link is not None:
                self._link.closed(self.out_of_time())
            asyncio.ensure_future(self.close())

    def healthy(self) -> bool:
        return super().healthy() and self.remaining_s() > 0

    def _space_settings(self) -> dict[str, str]:
        c = self.config
        return {STORE_DIR: f"store_size_mb={c.store_size_mb}", c.workdir: f"workspace_size_mb={c.workspace_size_mb}"}

    def _scratch_places(self) -> tuple[str, tuple[str, ...]]:
        return "/", SCRATCH_PLACES

    def _wiped_places(self) -> tuple[str, ...]:
        return WIPED_PLACES

    def _reset_script(self) -> str:
        # Inside the container only: kill -1 spares PID 1 (the agent) and the calling shell. Every writable
        # place goes, so nothing is left to the sandbox's next user.
        places = " ".join((*SCRATCH_PLACES, *WIPED_PLACES, "/run/agentflow"))
        return (
            "kill -9 -1 2>/dev/null; "
            f"find {places} -mindepth 1 -maxdepth 1 -exec rm -rf {{}} + 2>/dev/null; "
            + super()._reset_script()
        )

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._deadline is not None:
            self._deadline.cancel()
        self._disconnect()
        if self._container is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self._container.remove, force=True)
