"""The Docker sandboxes' watchdog: a tiny process that removes a dead owner's containers within a second
(why it is needed: docs/concepts/sandboxes.md, "No leaks").

It polls its parent's pid rather than waiting for a parent-death signal because that signal is tied to the
thread that forked it and could arrive before a handler was armed; a poll has neither gap. It runs in its own
session (Ctrl-C in the terminal is the owner's to handle) and imports docker-py only when it has work to do.

This file is also the watchdog's program (`python -c <this file> OWNER_PID HOST LABEL`): everything at module
level is standard library.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

POLL_S = 0.25
_started: dict[int, subprocess.Popen[bytes]] = {}  # owner pid -> its watchdog (one per process, by nature)
_started_lock = threading.Lock()


def ensure_watchdog(label: str, host: str) -> None:
    """Start this process's watchdog unless it runs already (a forked child gets its own: its pid differs)."""
    owner = os.getpid()
    with _started_lock:
        if owner in _started:
            return
        _started[owner] = subprocess.Popen(
            [sys.executable, "-c", Path(__file__).read_text(), str(owner), host, label],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd="/", start_new_session=True,  # cwd "/": `-c` puts it first on sys.path, so no docker.py there
        )


def _sweep(owner: int, host: str, label: str) -> None:
    """Remove every container of `owner` on `host`, in parallel (each removal is a kill plus a delete)."""
    try:
        import docker

        client = docker.from_env(timeout=60)
        found = client.api.containers(all=True, filters={"label": [f"{label}.pid={owner}", f"{label}.host={host}"]})
    except Exception:  # noqa: BLE001 - no engine or no docker-py: nothing this process can remove
        return

    def remove(cid: str) -> None:
        # already gone (auto-remove) or the engine refused: nothing more this process can do
        with contextlib.suppress(Exception):
            client.api.remove_container(cid, force=True)

    workers = [threading.Thread(target=remove, args=(c["Id"],)) for c in found]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def watch(owner: int, host: str, label: str) -> None:
    """Wait for `owner` (our parent) to die, then sweep its containers."""
    while os.getppid() == owner:
        time.sleep(POLL_S)
    _sweep(owner, host, label)


if __name__ == "__main__":
    watch(int(sys.argv[1]), sys.argv[2], sys.argv[3])
