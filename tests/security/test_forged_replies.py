"""Item 1: a process inside the sandbox cannot speak for the in-container agent.

A daemon left running in the sandbox tries every way in: writing reply lines to the agent's stdout through
/proc/1/fd, through every fd it can open under /proc/*/fd, ptrace on the agent, and signals to it. Meanwhile
the host runs commands whose true results it knows; every result must be the true one.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from agentflow.events import EventLog
from agentflow.sandbox import open_sandbox
from agentflow.sandbox.config import SandboxConfig
from agentflow.sandbox.session import AgentLink

ATTACK = r'''
import ctypes, json, os, signal, time
forged = [json.dumps({"id": i, "ok": True, "exit_code": 0, "stdout": "FORGED", "stderr": "",
                      "duration_s": 0.0, "data": "Rk9SR0VE"}) for i in range(1, 400)]
blob = ("\n".join(forged) + "\n").encode()
tried = {}
def note(what, ok):
    tried[what] = tried.get(what) or ok
libc = ctypes.CDLL(None, use_errno=True)
end = time.time() + float(os.environ.get("ATTACK_S", "20"))
while time.time() < end:
    for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
        if int(pid) == os.getpid():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            note(f"list /proc/{pid}/fd", True)
        except OSError:
            fds = ["0", "1", "2"] if pid == "1" else []
        for fd in fds:
            try:
                f = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
                os.write(f, blob)
                os.close(f)
                note(f"write /proc/{pid}/fd/{fd}", True)
            except OSError:
                note(f"write /proc/{pid}/fd/{fd}", False)
    for what in ("mem", "environ"):
        try:
            open(f"/proc/1/{what}", "rb").read(1)
            note(f"read /proc/1/{what}", True)
        except OSError:
            note(f"read /proc/1/{what}", False)
    note("ptrace attach 1", libc.ptrace(16, 1, 0, 0) == 0)  # PTRACE_ATTACH
    for sig in (signal.SIGSTOP, signal.SIGTERM, signal.SIGKILL, signal.SIGUSR1):
        try:
            os.kill(1, sig)
            note(f"signal {sig.name}", True)
        except OSError:
            note(f"signal {sig.name}", False)
    # written aside and renamed: the host may read the report at any moment, never half-written
    with open("/tmp/attack.json.part", "w") as fh:
        json.dump(tried, fh)
    os.replace("/tmp/attack.json.part", "/tmp/attack.json")
    time.sleep(0.01)
'''

pytestmark = pytest.mark.docker


async def test_a_daemon_in_the_sandbox_cannot_forge_replies(docker_image: str) -> None:
    async with open_sandbox("docker", SandboxConfig(image=docker_image), events=EventLog()) as sb:
        assert sb.agent_dumpable is False  # the agent's /proc entries are closed to sandboxed processes
        await sb.write_file("/tmp/attack.py", ATTACK)
        await sb.write_file("truth.txt", "the real content\n")
        # The file is the sandbox's own: the daemon may rewrite it (it reopens every fd it finds under
        # /proc/*/fd for writing, grep's open truth.txt among them), and a read would then truly return its
        # writes. Read-only, no process in there can change it, so any other content would be a forged reply.
        assert (await sb.exec("chmod 0444 truth.txt")).ok
        started = await sb.exec("setsid python3 /tmp/attack.py >/dev/null 2>&1 </dev/null &")
        assert started.ok
        await asyncio.sleep(2)  # the daemon is spraying forged replies by now
        for round_ in range(40):
            # The forged replies claim exit 0 and stdout "FORGED". A command's own output is the sandbox's to
            # write (the daemon may append to it through the command's pipes, as any process in there
            # could), but the reply - its exit code, and the agent's own reads - comes from the agent alone.
            res = await sb.exec(f"echo real-{round_}; exit 3")
            assert res.exit_code == 3, res
            # the command's own line is there, unless the daemon's writes into its pipe filled the output
            # limit first (then the reply says so: truncated, bytes omitted -- still the agent's true account)
            assert f"real-{round_}\n" in res.stdout or (res.truncated and res.omitted_bytes > 0), res
            assert await sb.read_file("truth.txt") == "the real content\n"
            assert (await sb.exec("grep -q 'the real content' truth.txt")).exit_code == 0
        report = json.loads(await sb.read_file("/tmp/attack.json"))
        # the daemon's own account (not trusted for the verdict above, which the host checked itself)
        assert report, "the attack daemon did not run"
        assert not report.get("write /proc/1/fd/1"), report
        assert not report.get("ptrace attach 1"), report
        assert not report.get("read /proc/1/mem"), report
        alive = await sb.exec("exit 0")
        assert alive.ok  # no signal stopped or killed the agent
        assert sb.link.tampered == 0  # nothing even reached the agent's reply stream


def test_unsigned_or_forged_lines_are_dropped_and_reported() -> None:
    seen: list[bytes] = []

    async def write(_: bytes) -> None:
        return None

    async def go() -> None:
        link = AgentLink(write, on_tamper=seen.append)
        link.expect_signed()
        call = asyncio.ensure_future(link.call("ping", wait=5))
        await asyncio.sleep(0)
        link.feed_line(b'{"id": 1, "ok": true, "forged": true}')  # unsigned
        link.feed_line(b"0" * 64 + b' {"id": 1, "ok": true, "forged": true}')  # wrong MAC
        import hashlib
        import hmac

        body = b'{"id": 1, "ok": true}'
        link.feed_line(hmac.new(link.key, body, hashlib.sha256).hexdigest().encode() + b" " + body)
        msg = await call
        assert "forged" not in msg
        assert link.tampered == 2 and len(seen) == 2

    asyncio.run(go())
