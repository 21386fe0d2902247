"""Hostile code: each attack is contained, the host and the other sandboxes carry on, and the reason is recorded."""

from __future__ import annotations

import asyncio
import os

import pytest
import pytest_asyncio

from agentflow.errors import SandboxError

pytestmark = [pytest.mark.docker, pytest.mark.asyncio(loop_scope="session")]


@pytest_asyncio.fixture(loop_scope="session")
async def pair(hostile_pool):
    """(victim, bystander): the attack runs in the first; the second must keep working."""
    a = await hostile_pool.acquire()
    b = await hostile_pool.acquire()
    await b.write_file("canary.txt", "still here\n")
    yield a, b
    assert await b.read_file("canary.txt") == "still here\n"
    assert (await b.exec("echo alive")).stdout == "alive\n"
    await hostile_pool.release(a)
    await hostile_pool.release(b)


async def _still_usable(box) -> None:
    res = await box.exec("echo ok", timeout=10)
    assert res.stdout == "ok\n"


async def test_fork_bomb(pair):
    victim, _ = pair
    res = await victim.exec(":(){ :|:& };:", timeout=5)
    assert res.limit_hit == "pids", res
    await _still_usable(victim)


async def test_memory_hog(pair):
    victim, _ = pair
    res = await victim.exec("python3 -c \"b = b'x' * (2 * 1024**3)\"")
    assert res.limit_hit == "memory" or "MemoryError" in res.stderr, res
    assert not res.ok
    await _still_usable(victim)


async def test_infinite_loop(pair):
    victim, _ = pair
    res = await victim.exec("python3 -c 'while True: pass'", timeout=2)
    assert res.timed_out and res.limit_hit == "timeout" and res.exit_code == 124
    await _still_usable(victim)


async def test_disk_fill(pair):
    victim, _ = pair
    res = await victim.exec("dd if=/dev/zero of=big bs=1M count=1000")
    assert not res.ok and res.limit_hit == "disk", res
    await victim.exec("rm -f big")
    await _still_usable(victim)


async def test_huge_stdout(pair):
    victim, _ = pair
    res = await victim.exec("yes hello")
    assert res.limit_hit == "output" and res.truncated and len(res.stdout) < 10_000
    await _still_usable(victim)


async def test_outbound_network(pair):
    victim, _ = pair
    res = await victim.exec(
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)\"", timeout=10
    )
    assert res.exit_code == 1 and "Network is unreachable" in res.stderr, res


async def test_reading_host_files(pair):
    victim, _ = pair
    marker = f"/tmp/agentflow-host-secret-{os.getpid()}"
    with open(marker, "w") as fh:
        fh.write("host secret")
    try:
        res = await victim.exec(f"cat {marker}; cat /etc/shadow; ls /root")
        assert "host secret" not in res.output and res.exit_code != 0
        assert "Permission denied" in res.stderr
    finally:
        os.unlink(marker)


async def test_killing_the_agent(pair):
    victim, _ = pair
    res = await victim.exec("kill -9 1; kill -TERM 1; kill -INT 1; pkill -9 python3; echo tried", timeout=10)
    assert "tried" in res.stdout
    await _still_usable(victim)  # PID 1 cannot be SIGKILLed from inside; the others are ignored


async def test_agent_death_is_reported_and_pool_replaces(hostile_pool):
    box = await hostile_pool.acquire()
    container = box._container
    await asyncio.to_thread(container.kill)  # from outside: the only way the agent can die
    with pytest.raises(SandboxError, match="agent stopped|closed"):
        await box.exec("true")
    assert not box.healthy()
    await hostile_pool.release(box)
    fresh = await hostile_pool.acquire()
    assert fresh is not box and (await fresh.exec("echo ok")).stdout == "ok\n"
    await hostile_pool.release(fresh)


async def test_writing_outside_the_workspace(pair):
    victim, _ = pair
    res = await victim.exec(
        "for p in /etc/passwd /usr/bin/x /root/x /home/agent/x /var/lib/agentflow/x.txt /x; do "
        "  (echo pwn > $p) 2>&1; done; echo done"
    )
    assert res.stdout.count("Read-only file system") + res.stdout.count("Permission denied") >= 5
    check = await victim.exec("grep -c pwn /etc/passwd || true")
    assert check.stdout.strip() == "0"
