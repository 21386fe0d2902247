"""A server child process that cannot outlive us: own process group, log file, pidfile, group kill.

- The kernel ends the child when this process dies, however it dies (kill -9 included): it is started with a
  parent-death signal (`_process.popen_bound`; SIGKILL for llama-server, SIGTERM for vLLM so that it stops
  its own workers).
- The child starts in a new session (`start_new_session=True`), so Ctrl-C in the terminal does not hit it
  half-way and `stop()` can kill it together with any children it spawned (vLLM forks workers).
- Every live process is stopped at interpreter exit (atexit); the CLI also turns SIGTERM/SIGHUP into a
  normal exit (`install_signal_handlers`) so the same clean-up runs.
- A pidfile per child (`<cache_dir>/serving/run/<pid>.json`) lets a later start reap servers whose owner died
  where no parent-death signal exists (not Linux), or that ignored theirs (`reap_orphans`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentflow._process import pid_alive, popen_bound
from agentflow.config import cache_dir
from agentflow.secrets import redact

_live: set[ManagedProcess] = set()
_live_lock = threading.Lock()


def run_dir() -> Path:
    path = cache_dir() / "serving" / "run"
    path.mkdir(parents=True, exist_ok=True)
    return path


class ManagedProcess:
    """One child process whose stdout+stderr go to `log_path`."""

    def __init__(self, argv: Sequence[str], *, log_path: Path, env: Mapping[str, str] | None = None,
                 label: str = "server", death_signal: int = signal.SIGKILL) -> None:
        self.death_signal = death_signal
        """What the kernel sends the child when this process dies."""
        self.argv = list(argv)
        self.log_path = Path(log_path)
        self.env = dict(env) if env is not None else None
        self.label = label
        self.popen: subprocess.Popen[bytes] | None = None
        self.pidfile: Path | None = None

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.popen = popen_bound(  # argv built by us, never a shell
                self.argv, death_signal=self.death_signal, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=self.env, start_new_session=True,
            )
        self.pidfile = run_dir() / f"{self.popen.pid}.json"
        self.pidfile.write_text(json.dumps({
            "pid": self.popen.pid, "owner_pid": os.getpid(), "label": self.label,
            "exe": os.path.basename(self.argv[0]), "started": time.time(), "log": str(self.log_path),
        }))
        with _live_lock:
            _live.add(self)
        guard_signals()

    def poll(self) -> int | None:
        """Exit code, or None while running."""
        return self.popen.poll() if self.popen is not None else None

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def tail(self, lines: int = 20) -> list[str]:
        """The last `lines` lines of the log, secrets redacted."""
        try:
            text = tail_text(self.log_path, 64 * 1024)
        except OSError:
            return []
        return [redact(line) for line in text.splitlines()[-lines:]]

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM the whole process group, SIGKILL it after `timeout` seconds; returns the exit code."""
        popen = self.popen
        if popen is None:
            return None
        try:
            if popen.poll() is None:
                _signal_group(popen.pid, signal.SIGTERM)
                try:
                    popen.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    _signal_group(popen.pid, signal.SIGKILL)
                    popen.wait(timeout=10)
            # children of the server (vLLM workers) may still be around in its group
            _signal_group(popen.pid, signal.SIGKILL)
        finally:
            with _live_lock:
                _live.discard(self)
            if self.pidfile is not None:
                self.pidfile.unlink(missing_ok=True)
        return popen.returncode

    def kill(self) -> None:
        """SIGKILL the group now (used by tests to simulate a crash; the pidfile stays until `stop`)."""
        if self.popen is not None and self.popen.poll() is None:
            _signal_group(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)


def tail_text(path: Path, size: int) -> str:
    """The last `size` bytes of the file at `path`, decoded."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        fh.seek(max(0, fh.tell() - size))
        return fh.read().decode("utf-8", errors="replace")


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def stop_all() -> None:
    """Stop every process started by this interpreter (registered with atexit)."""
    with _live_lock:
        procs = list(_live)
    for proc in procs:
        with contextlib.suppress(Exception):  # best effort at exit
            proc.stop(timeout=5)


atexit.register(stop_all)

_guarded: set[int] = set()


def guard_signals() -> None:
    """Make SIGTERM and SIGHUP stop this interpreter's servers for library users too (atexit does not run when
    a signal kills the process). Installed once per signal, from the main thread only, and only over the
    default disposition or a Python handler, which is then called (an app's own handler keeps working);
    with the default disposition the signal is re-raised after the servers stop, so the process still ends
    as the signal says. The CLI's `install_signal_handlers` (SystemExit) counts as a Python handler."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if sig in _guarded:
            continue
        previous = signal.getsignal(sig)
        if previous is signal.SIG_IGN or previous is None:
            continue
        signal.signal(sig, _stopping_handler(sig, previous))
        _guarded.add(sig)


def _stopping_handler(sig: int, previous: Any) -> Any:
    def handler(signum: int, frame: Any) -> None:
        stop_all()
        if callable(previous):
            previous(signum, frame)
            return
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    return handler


def reap_orphans() -> list[int]:
    """Kill servers left behind by agentflow processes that no longer exist; returns the pids reaped."""
    reaped = []
    for pidfile in run_dir().glob("*.json"):
        try:
            info: dict[str, Any] = json.loads(pidfile.read_text())
            pid, owner = int(info["pid"]), int(info["owner_pid"])
        except (OSError, ValueError, KeyError):
            pidfile.unlink(missing_ok=True)
            continue
        if pid_alive(owner):
            continue
        if pid_alive(pid) and _cmdline_matches(pid, str(info.get("exe", ""))):
            _signal_group(pid, signal.SIGKILL)
            reaped.append(pid)
        pidfile.unlink(missing_ok=True)
    return reaped


def _cmdline_matches(pid: int, exe: str) -> bool:
    """Guard against pid reuse: only kill a process still running the executable we started."""
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return False
    return bool(exe) and os.path.basename(argv0) == exe


def install_signal_handlers() -> None:
    """Turn SIGTERM and SIGHUP into SystemExit so `finally` blocks and atexit stop the servers (CLI only)."""

    def _exit(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit)
