"""Process helpers shared by the sandbox and serving layers: liveness, and children bound to our life.

`popen_bound` starts a child that the kernel signals when this process dies, however it dies (kill -9
included): the child arms Linux's parent-death signal (`prctl(PR_SET_PDEATHSIG)`) before it execs. The kernel
ties that signal to the *thread* that forked the child, not to the process, so a child forked from a worker
thread (`asyncio.to_thread`, whose threads end with their event loop) would be signalled when that thread
ends. Every bound child is therefore forked by one daemon thread that lives as long as the process (started
on first use, again in a forked child, which has no threads of its parent's).
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

PR_SET_PDEATHSIG = 1


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _libc_prctl() -> Callable[..., int] | None:
    """libc's prctl, resolved before a fork so the child only calls it; None off Linux."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


def _arm_death_signal(sig: int, parent: int) -> Callable[[], None]:
    """The child's last step before exec: ask for `sig` when the parent dies; exit if it already has (it
    may die between the fork and the prctl, and then no signal would ever come)."""
    prctl = _libc_prctl()

    def arm() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return arm


class _Spawner:
    """One daemon thread that forks every bound child (see the module docstring for why one thread)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="agentflow-spawner", daemon=True).start()

    def _serve(self) -> None:
        while True:
            job, future = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(job())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, which re-raises it
                future.set_exception(exc)

    def run(self, job: Callable[[], Any]) -> Any:
        future: Future[Any] = Future()
        self._jobs.put((job, future))
        return future.result()


_spawner: list[_Spawner] = []  # process-wide by nature: the thread lives exactly as long as the process
_spawner_lock = threading.Lock()


def _forget_spawner() -> None:
    global _spawner_lock
    _spawner.clear()
    _spawner_lock = threading.Lock()  # a fork may have copied it held by a thread that does not exist here


os.register_at_fork(after_in_child=_forget_spawner)


def _the_spawner() -> _Spawner:
    with _spawner_lock:
        if not _spawner or _spawner[0].pid != os.getpid():
            _spawner[:] = [_Spawner()]
        return _spawner[0]


def popen_bound(argv: Sequence[str], *, death_signal: int = signal.SIGKILL, **popen: Any) -> subprocess.Popen[bytes]:
    """`subprocess.Popen(argv, **popen)` whose child gets `death_signal` from the kernel when this process
    dies, kill -9 included (Linux; elsewhere a plain Popen). SIGKILL suits a child that holds no state;
    a child that must clean up (a server with workers of its own, a watchdog) asks for a signal it handles."""
    if "preexec_fn" in popen:
        raise ValueError("popen_bound sets preexec_fn itself")
    arm = _arm_death_signal(death_signal, os.getpid())

    def start() -> subprocess.Popen[bytes]:
        # preexec_fn runs between fork and exec: it makes one syscall and reads our pid, nothing that could
        # wait for a lock another thread held at the fork
        return subprocess.Popen(list(argv), preexec_fn=arm, **popen)  # noqa: PLW1509

    result: subprocess.Popen[bytes] = _the_spawner().run(start)
    return result
