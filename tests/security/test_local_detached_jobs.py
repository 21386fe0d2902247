"""Item 9: the local backend's promise to end background jobs holds for jobs that detach.

A `setsid` job and a double-forked daemon leave the command's session and process group; they must still be
gone after `close()` and after the host process is killed with SIGKILL (the sandbox's agent is a child
subreaper: every orphan of its commands is re-parented to it, and it kills its whole process tree).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentflow.sandbox.local import LocalBackendWarning, LocalSandbox

# Each job writes its own pid to a file once it has detached; a unique word in its command line tells it
# apart from an unrelated process that reuses the pid.
MARK = f"agentflow-detached-{os.getpid()}"
PY = sys.executable
DAEMONS = (
    f"setsid sh -c 'echo $$ > setsid.pid; exec {PY} -c \"import time; time.sleep(300)\" {MARK}' "
    ">/dev/null 2>&1 </dev/null & "
    f"{PY} -c \"\n"
    "import os, sys, time\n"
    "if os.fork(): os._exit(0)\n"
    "os.setsid()\n"
    "if os.fork(): os._exit(0)\n"
    "open('daemon.pid', 'w').write(str(os.getpid()))\n"
    "time.sleep(300)\n"
    f"\" {MARK} >/dev/null 2>&1 </dev/null & "
    "for i in $(seq 100); do [ -s setsid.pid ] && [ -s daemon.pid ] && break; sleep 0.05; done; "
    "cat setsid.pid daemon.pid"
)


def _alive(pid: int) -> bool:
    """Running (not a zombie) and still one of ours (its command line carries MARK)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z" and MARK.encode() in cmdline


def _gone_within(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def _kill_leftovers(pids: list[int]) -> None:
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


async def test_close_ends_setsid_and_double_forked_jobs() -> None:
    with pytest.warns(LocalBackendWarning):
        sb = await LocalSandbox.start()
    res = await sb.exec(DAEMONS, timeout=30)
    pids = [int(p) for p in res.stdout.split()]
    assert len(pids) == 2 and all(_alive(p) for p in pids), res
    assert os.getsid(pids[0]) == pids[0]  # the setsid job leads a session of its own
    await sb.close()
    left = _gone_within(pids, 5)
    _kill_leftovers(left)
    assert not left, f"detached jobs {left} outlived close()"


HOST = f"""
import asyncio, os, sys, time, warnings
warnings.simplefilter("ignore")
from agentflow.sandbox.local import LocalSandbox
async def main():
    sb = await LocalSandbox.start()
    res = await sb.exec({DAEMONS!r}, timeout=30)
    holder = 0
    if sys.argv[1] == "fork":  # a forked child keeps every fd, the agent's stdin pipe too: no EOF reaches it
        holder = os.fork()
        if holder == 0:
            time.sleep(300)
            os._exit(0)
    print(sb._proc.pid, holder, res.stdout.replace("\\n", " "), flush=True)
    await asyncio.sleep(300)
asyncio.run(main())
"""


@pytest.mark.parametrize("stdin_kept_open", [False, True], ids=["plain", "pipe-held-by-a-fork"])
def test_a_killed_host_takes_detached_jobs_with_it(stdin_kept_open: bool) -> None:
    argv = [sys.executable, "-c", HOST, "fork" if stdin_kept_open else "plain"]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            agent, holder, *pids = (int(w) for w in proc.stdout.readline().split())
            assert len(pids) == 2 and all(_alive(p) for p in pids)
        finally:
            proc.send_signal(signal.SIGKILL)  # no cleanup code runs in the host
            proc.wait()
    try:
        left = _gone_within(pids, 5)
        _kill_leftovers(left)
        assert not left, f"detached jobs {left} outlived their host (killed with -9)"
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _state(agent) not in ("Z", "gone"):
            time.sleep(0.1)
        assert _state(agent) in ("Z", "gone"), "the agent outlived its host"
    finally:
        if holder:
            os.kill(holder, signal.SIGKILL)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
