"""The docker backend against real containers from the offline image."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

import pytest

from agentflow.errors import SandboxError

pytestmark = [pytest.mark.docker, pytest.mark.asyncio(loop_scope="session")]


async def test_exec_reports_output_exit_code_and_duration(sb):
    res = await sb.exec("echo out; echo err >&2; exit 3")
    assert (res.stdout, res.stderr, res.exit_code) == ("out\n", "err\n", 3)
    assert not res.ok and not res.timed_out and res.duration_s > 0


async def test_exec_cwd_env_stdin(sb):
    await sb.exec("mkdir -p sub")
    res = await sb.exec('pwd; echo "$GREETING"; cat', cwd="sub", env={"GREETING": "hi"}, stdin="from stdin")
    assert res.stdout == f"{sb.workdir}/sub\nhi\nfrom stdin"


async def test_command_not_found_is_exit_127_with_message(sb):
    res = await sb.exec("definitely-not-a-command --x")
    assert res.exit_code == 127 and "command not found" in res.stderr


async def test_hardened_defaults(sb):
    res = await sb.exec(
        "id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; touch /usr/x 2>&1; "
        "touch /tmp/ok && echo tmp-writable; touch ok && echo ws-writable; ls /sys/class/net"
    )
    out = res.stdout
    assert out.splitlines()[0] == "1000"
    assert "CapEff:\t0000000000000000" in out and "NoNewPrivs:\t1" in out
    assert "Read-only file system" in out
    assert "tmp-writable" in out and "ws-writable" in out
    assert out.split("ws-writable\n")[1].split() == ["lo"]  # no network interface but loopback
    settings = sb.info().settings
    assert (
        settings["network"] is False
        and settings["read_only_root"] is True
        and settings["cap_drop"] == ["ALL"]
    )


async def test_timeout_kills_process_group(sb):
    res = await sb.exec("sleep 100 & sleep 100; echo never", timeout=1)
    assert res.timed_out and res.exit_code == 124 and res.limit_hit == "timeout" and "never" not in res.stdout
    left = await sb.exec("ps -eo comm | grep -c '^sleep$' || true")
    assert left.stdout.strip() == "0"


async def test_output_is_capped_head_and_tail(sb):
    res = await sb.exec("echo FIRST; head -c 500000 /dev/zero | tr '\\0' x; echo; echo LAST")
    assert res.truncated and res.omitted_bytes > 400_000
    assert res.stdout.startswith("FIRST") and res.stdout.rstrip().endswith("LAST")
    assert f"{res.omitted_bytes} bytes omitted" in res.stdout


async def test_file_ops(sb):
    await sb.write_file("pkg/mod.py", "x = 1\n")
    assert await sb.read_file("pkg/mod.py") == "x = 1\n"
    entries = await sb.list_files(".", recursive=True)
    assert {(e.path, e.is_dir) for e in entries} >= {("pkg", True), ("pkg/mod.py", False)}
    with pytest.raises(SandboxError, match="no such file"):
        await sb.read_file("missing.txt")


async def test_apply_patch(sb):
    await sb.write_file("a.txt", "one\ntwo\nthree\n")
    diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
    res = await sb.apply_patch(diff)
    assert res.ok, res.output
    assert await sb.read_file("a.txt") == "one\nTWO\nthree\n"
    bad = await sb.apply_patch(diff)  # the context no longer matches
    assert not bad.ok and "does not apply" in bad.stderr
    assert await sb.read_file("a.txt") == "one\nTWO\nthree\n"


async def test_upload_tree(sb, tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.py").write_text("print('hi')\n")
    await sb.upload(tmp_path, "up")
    assert (await sb.exec("python3 up/d/f.py")).stdout == "hi\n"


async def test_snapshot_restore_across_pooled_sandboxes(pool):
    a = await pool.acquire()
    b = await pool.acquire()
    try:
        await a.write_file("src/app.py", "v = 1\n")
        await a.write_file("notes.txt", "untracked too\n")
        s1 = await a.snapshot()
        await a.write_file("src/app.py", "v = 2\n")
        await a.exec("rm notes.txt; mkdir build; echo junk > build/x")
        s2 = await a.snapshot()
        assert s1 != s2
        await b.restore(s1)  # a different container, same pool (shared object store)
        assert await b.read_file("src/app.py") == "v = 1\n"
        assert await b.read_file("notes.txt") == "untracked too\n"
        await b.restore(s2)
        assert await b.read_file("src/app.py") == "v = 2\n"
        assert (await b.exec("ls")).stdout.split() == ["build", "src"]
        await a.restore(s1)
        assert (await a.exec("ls")).stdout.split() == ["notes.txt", "src"]
        assert "-v = 1\n+v = 2" in await b.diff(s1)
    finally:
        await pool.release(a)
        await pool.release(b)


async def test_released_sandbox_comes_back_empty(pool):
    a = await pool.acquire()
    await a.write_file("leftover.txt", "x")
    await pool.release(a)
    seen = []
    for _ in range(pool.size):
        box = await pool.acquire()
        seen.append(box)
        assert "leftover.txt" not in (await box.exec("ls -A")).stdout
    for box in seen:
        await pool.release(box)


async def test_many_concurrent_commands_on_many_sandboxes(pool):
    boxes = [await pool.acquire() for _ in range(2)]
    try:
        results = await asyncio.gather(*(b.exec(f"sleep 0.3; echo {i}") for i in range(10) for b in boxes))
        assert sorted(int(r.stdout) for r in results) == sorted(list(range(10)) * 2)
    finally:
        for b in boxes:
            await pool.release(b)


async def test_container_is_labelled_and_removed_on_close(sandbox_image):
    from agentflow.sandbox.config import SandboxConfig
    from agentflow.sandbox.docker import LABEL, DockerSandbox, docker_client

    box = await DockerSandbox.start(SandboxConfig(image=sandbox_image))
    client = docker_client()
    labels = client.containers.get(box.id).labels
    assert labels[LABEL] == "1" and labels[f"{LABEL}.pid"] == str(os.getpid())
    await box.close()
    names = [c.name for c in client.containers.list(all=True, filters={"label": LABEL})]
    assert box.id not in names
    with pytest.raises(SandboxError, match="closed"):
        await box.exec("true")


async def test_sandbox_wall_clock_limit(sandbox_image):
    from agentflow.sandbox.config import SandboxConfig
    from agentflow.sandbox.docker import DockerSandbox

    box = await DockerSandbox.start(
        SandboxConfig(image=sandbox_image, sandbox_timeout_s=3, command_timeout_s=3)
    )
    try:
        res = await box.exec("sleep 60")
        assert res.timed_out
        with pytest.raises(SandboxError, match="wall-clock limit"):
            await box.exec("true")
    finally:
        await box.close()


async def test_orphans_of_dead_owners_are_reaped(pool, sandbox_image):
    from agentflow.sandbox.docker import LABEL, docker_client, reap_orphans

    client = docker_client()
    proc = await asyncio.create_subprocess_exec("true")
    await proc.wait()  # a pid that no longer exists
    import socket

    orphan = client.containers.create(
        sandbox_image,
        command=["sleep", "60"],
        labels={LABEL: "1", f"{LABEL}.pid": str(proc.pid), f"{LABEL}.host": socket.gethostname()},
    )
    box = await pool.acquire()
    try:
        removed = reap_orphans(client)
        assert orphan.name in removed
        assert (await box.exec("echo alive")).stdout == "alive\n"  # a live owner's sandbox is kept
    finally:
        await pool.release(box)


_CRASHER = """
import asyncio
import contextlib
from agentflow.sandbox.docker import DockerSandbox
async def main():
    sb = await DockerSandbox.start()
    print(sb.id, flush=True)
    await asyncio.sleep(120)
asyncio.run(main())
"""


async def test_owner_crash_leaves_no_container_and_no_volume(sandbox_image):
    import sys
    import time

    from agentflow.sandbox.docker import LABEL, docker_client

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CRASHER, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    name = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode().strip()
    client = docker_client()
    assert client.containers.get(name).status == "running"
    proc.kill()  # SIGKILL: no cleanup code runs in the owner
    await proc.wait()
    deadline = time.monotonic() + 30
    while client.containers.list(all=True, filters={"name": name}) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert not client.containers.list(all=True, filters={"name": name})
    # the snapshot store is a tmpfs inside the container: nothing of it stays on the host
    assert not client.volumes.list(filters={"label": f"{LABEL}.pid={proc.pid}"})


_FORKING_CRASHER = """
import asyncio, os, sys, time
from agentflow.sandbox.docker import DockerSandbox
async def main():
    sb = await DockerSandbox.start()
    if os.fork() == 0:  # a forked process (a multiprocessing worker, say) holds the container's stdin socket
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # but not our stdout: the test waits for that to close
        time.sleep(60)
        os._exit(0)
    print(sb.id, flush=True)
    await asyncio.sleep(120)
asyncio.run(main())
"""


def _children(pid: int) -> list[int]:
    from pathlib import Path

    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
    return found


async def test_kill_9_of_the_owner_removes_its_container_even_when_a_fork_holds_the_socket(sandbox_image):
    import sys
    import time

    from agentflow._process import pid_alive
    from agentflow.sandbox.docker import docker_client

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _FORKING_CRASHER, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    name = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode().strip()
    client = docker_client()
    children = _children(proc.pid)  # the fork and the watchdog
    try:
        assert client.containers.get(name).status == "running"
        proc.kill()  # SIGKILL: no cleanup code runs in the owner, and the fork keeps the attach socket open
        await proc.wait()
        deadline = time.monotonic() + 5
        while client.containers.list(all=True, filters={"name": name}) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert not client.containers.list(all=True, filters={"name": name}), "container outlived its owner by 5 s"
        holders = [pid for pid in children if pid_alive(pid) and not _is_watchdog(pid)]
        assert holders, "the fork that holds the socket should still be running"
        deadline = time.monotonic() + 10
        while any(_is_watchdog(pid) for pid in children) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert not any(_is_watchdog(pid) for pid in children), "the watchdog stays after its sweep"
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _is_watchdog(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"watchdog" in fh.read()
    except OSError:
        return False


async def test_defaults_can_be_relaxed_explicitly(sandbox_image):
    from agentflow.sandbox import open_sandbox

    relaxed = {
        "image": sandbox_image,
        "read_only_root": False,
        "network": True,
        "cap_drop": [],
        "pids_limit": 512,
    }
    async with open_sandbox("docker", relaxed) as box:
        res = await box.exec("touch /home/agent/x && echo root-writable; ls /sys/class/net")
        assert "root-writable" in res.stdout and "eth0" in res.stdout.split(), res.output
        assert box.info().settings["network"] is True and box.info().settings["pids_limit"] == 512
