"""A Ray cluster of separate `ray start` processes on 127.0.0.1: for tests, benchmarks and trying scale-out
on one machine. Each node is its own session (so a test can kill one node, workers and all), has no
dashboard, a small object store, token authentication and usage statistics off.

Ray turns `--node-ip-address=127.0.0.1` into the machine's outward address and binds its servers to all
interfaces. So by default (`private_network=True`, needs root) the nodes and the drivers run in a network
namespace of their own that has nothing but a loopback interface: whatever Ray binds or dials stays on that
loopback. Drivers run inside it with `cluster.wrap(argv)` and `cluster.driver_env`.

    with LocalRayCluster() as cluster:
        cluster.add_node(cpus=1)          # the head (the first node added)
        cluster.add_node(cpus=1)          # a second node
        ... agentflow eval ... --executor ray --ray-address {cluster.address}   # with cluster.driver_env set
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Self

from agentflow.errors import AgentflowError
from agentflow.serving.ports import pick_free_port

_PROBE = """
import socket, sys, time
deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        if sock.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0:
            sys.exit(0)
    time.sleep(0.2)
sys.exit(1)
"""


def session_pids(sid: int) -> list[int]:
    """Processes of session `sid` (a node's `ray start` and everything it started, workers included)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # after the command: state, ppid, pgrp, session
            pids.append(int(entry.name))
    return pids


@dataclass
class RayNode:
    """One `ray start --block` process (and the node's processes in its group)."""

    proc: subprocess.Popen[bytes]
    cpus: int
    log: Path
    head: bool = False

    def kill(self) -> None:
        """SIGKILL every process of the node's session (raylet, its workers, the head's GCS)."""
        for pid in session_pids(self.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()

    def busy_tasks(self) -> dict[str, int]:
        """The Ray tasks running on this node now, by name (worker process titles `ray::<name>`): their pids."""
        busy = {}
        for pid in session_pids(self.proc.pid):
            try:
                title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            except OSError:
                continue
            if title.startswith("ray::") and title not in ("ray::IDLE", "ray::DashboardAgent",
                                                           "ray::RuntimeEnvAgent") and "RayLedger" not in title:
                busy[title.removeprefix("ray::")] = pid
        return busy


class LocalRayCluster:
    """Start with `add_node` (the first is the head); `stop()` (or leaving the `with`) kills every node."""

    def __init__(self, *, object_store_mb: int = 200, env: dict[str, str] | None = None,
                 temp_dir: str | Path | None = None, private_network: bool = True) -> None:
        self.object_store_mb = object_store_mb
        # short: Ray's unix sockets live under it (their paths have a length limit)
        self.temp_dir = Path(temp_dir) if temp_dir else Path(tempfile.mkdtemp(prefix="afray-", dir="/tmp"))
        self.temp_dir.mkdir(parents=True, exist_ok=True)
        # every node and driver must present this token (Ray's token authentication), kept in the cluster's dir
        token = self.temp_dir / "auth_token"
        token.touch(mode=0o600)
        token.write_text(secrets.token_hex(32))
        self.driver_env = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
                           "RAY_AUTH_TOKEN_PATH": str(token)}
        """What a driver process needs in its environment to join the cluster."""
        self.env = {**os.environ, **(env or {}), **self.driver_env}
        self.port = pick_free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.nodes: list[RayNode] = []
        self._logs: list[IO[bytes]] = []
        self._netns: subprocess.Popen[bytes] | None = None
        if private_network:
            self._start_netns()

    def _start_netns(self) -> None:
        """A network namespace with only a loopback interface, held open by a sleeping process."""
        try:
            self._netns = subprocess.Popen(["unshare", "--net", "--", "sleep", "infinity"],
                                           stdin=subprocess.DEVNULL, start_new_session=True)
            time.sleep(0.2)
            subprocess.run(self.wrap(["ip", "link", "set", "lo", "up"]), check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            self.stop()
            raise AgentflowError(f"cannot make a private network namespace (needs root, unshare and ip): {exc}")

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` run inside the cluster's network namespace (unchanged without one)."""
        if self._netns is None:
            return list(argv)
        return ["nsenter", f"--net=/proc/{self._netns.pid}/ns/net", "--", *argv]

    def _wait_port(self, port: int, proc: subprocess.Popen[bytes], timeout: float, log: Path) -> None:
        probe = subprocess.Popen(self.wrap([sys.executable, "-c", _PROBE, str(port), str(timeout)]))
        while probe.poll() is None:
            if proc.poll() is not None:
                probe.kill()
                probe.wait()
                raise AgentflowError(f"ray start exited with {proc.returncode}: {log.read_text()[-800:]}")
            time.sleep(0.2)
        if probe.returncode != 0:
            raise AgentflowError(f"a Ray node did not open port {port} within {timeout:.0f}s: "
                                 f"{log.read_text()[-800:]}")

    def _command(self, head: bool, cpus: int, nm_port: int, resources: str | None) -> list[str]:
        ray = str(Path(sys.executable).parent / "ray")
        ports = ("object-manager", "dashboard-agent-listen", "dashboard-agent-grpc", "runtime-env-agent",
                 "metrics-export")
        cmd = [ray, "start", "--block", "--disable-usage-stats", "--node-ip-address=127.0.0.1",
               f"--num-cpus={cpus}", f"--object-store-memory={self.object_store_mb * 2**20}",
               f"--node-manager-port={nm_port}", *(f"--{name}-port={pick_free_port()}" for name in ports)]
        if head:
            cmd += ["--head", f"--port={self.port}", "--include-dashboard=false", f"--temp-dir={self.temp_dir}"]
        else:
            cmd += [f"--address={self.address}"]
        if resources:
            cmd += [f"--resources={resources}"]
        return cmd

    def add_node(self, cpus: int = 1, *, resources: str | None = None, timeout: float = 90.0) -> RayNode:
        """Start a node (the head when it is the first) and wait until its raylet listens."""
        head = not self.nodes
        nm_port = pick_free_port()
        log_path = self.temp_dir / f"node-{len(self.nodes)}.log"
        self.temp_dir.mkdir(parents=True, exist_ok=True)
        log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self._logs.append(log)
        proc = subprocess.Popen(self.wrap(self._command(head, cpus, nm_port, resources)), env=self.env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        node = RayNode(proc, cpus, log_path, head=head)
        self.nodes.append(node)
        try:
            if head:
                self._wait_port(self.port, proc, timeout, log_path)
            self._wait_port(nm_port, proc, timeout, log_path)
        except AgentflowError:
            self.stop()
            raise
        return node

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.kill()
        self.nodes.clear()
        for log in self._logs:
            log.close()
        self._logs.clear()
        if self._netns is not None:
            self._netns.kill()
            self._netns.wait()
            self._netns = None
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
