"""The in-sandbox agent: one small stdlib-only Python process per sandbox, speaking JSON lines.

It is the container's main process (PID 1, so commands in the sandbox cannot SIGKILL it) or, for the local
backend, a child process. The host sends its source over stdin at start (nothing is baked into the image).

Requests (one JSON object per line on stdin): {"id": N, "op": NAME, ...}. Replies on stdout:
{"id": N, "ok": true, ...} or {"id": N, "ok": false, "error": "..."}. Requests run concurrently in threads.
Ops: hello, exec, read, write, list, untar, end_processes, wipe, shutdown. Patches and snapshots are `exec`
calls built by the host. This file must run on the image's Python 3 with nothing but the standard library.

The reply channel is the host's only source of truth about the sandbox, so sandboxed commands must not be
able to write to it. Two defences (docs/security.md):
- the agent makes itself non-dumpable at start: /proc/<agent>/fd, /proc/<agent>/mem and ptrace then need
  CAP_SYS_PTRACE, which no sandboxed process has, even under the agent's own uid (and as PID 1 of its pid
  namespace the agent cannot be killed or stopped from inside);
- after `hello` every reply line is `<hmac> <json>`, keyed with a per-sandbox secret the host sends in the
  `hello` request (it lives only in this process's memory); the host drops any line that does not verify.
"""

import base64
import contextlib
import hashlib
import hmac
import io
import json
import os
import resource
import selectors
import signal
import stat
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Collection, Iterator
from types import FrameType
from typing import IO, Any

# A request and its reply: JSON objects (each op reads the fields it needs from its request)
Request = dict[str, Any]
Reply = dict[str, Any]

_out_lock = threading.Lock()
_state: dict[str, Any] = {
    "workdir": "/workspace",
    "env": {},
    "rlimits": {},
    "output_limit": 64000,
    "output_kill": 256000000,
}
_key: dict[str, bytes | None] = {"value": None}  # the reply-signing key, set by hello; never written anywhere
_RESULTS_LIMIT = 64 * 1024 * 1024  # a side-channel result larger than this is dropped, not cut

# --- the process tree ------------------------------------------------------------------------------------------
# Every command starts its own session (pid == sid), so a timeout can kill its group. A job can still leave
# that session (setsid, a double fork); what keeps it in reach is the tree: in Docker the agent is PID 1 and
# every orphan is re-parented to it; as a local child process it makes itself a child subreaper for the same
# effect. `shutdown`, the host going away (stdin EOF) and the host dying (parent-death signal) kill the whole
# tree, so no background job outlives its sandbox (the local backend has no container to take them along).
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    """prctl(option, value); True when the kernel accepted it."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        result: int = libc.prctl(option, value, 0, 0, 0)
        return result == 0
    except (OSError, AttributeError, ImportError):
        return False


def _proc_stats() -> dict[int, list[str]]:
    """{pid: the fields of its /proc/<pid>/stat after the command name} of every process in sight."""
    stats: dict[int, list[str]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return stats
    for entry in entries:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    stats[int(entry)] = fh.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
    return stats


def _descendants(spare: Collection[int] = ()) -> list[int]:
    """Pids of every live process below this one, except the `spare` pids and what is below them (one pass
    over /proc; zombies have no children to find)."""
    children: dict[int, list[int]] = {}
    for pid, fields in _proc_stats().items():
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(pid)
    found: list[int] = []
    todo = [os.getpid()]
    while todo:
        for pid in children.get(todo.pop(), ()):
            if pid not in spare:
                found.append(pid)
                todo.append(pid)
    return found


def _kill_tree(spare: Collection[object] = ()) -> tuple[int, int]:
    """SIGKILL every process below the agent but the commands of the requests `spare` names (and what is below
    them), again until none is left (one may fork while the pass runs; its child is below the agent too and
    is found by the next pass). How many were killed, and how many still lived after five seconds of passes.
    Each pass lists under the reaper's lock, which a command's start holds from fork to registration: a
    spared request's command is never caught between the two."""
    ended = 0
    deadline = time.monotonic() + 5
    while True:
        with _reap_lock:
            keep = {pid for rid, pid in _running.items() if rid in spare}
            pids = _descendants(keep)
        if not pids or time.monotonic() >= deadline:
            return ended, len(pids)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                ended += 1
        time.sleep(0.01)


def _keep_the_tree(parent: int) -> None:
    """Local backend: become a child subreaper, and have the kernel signal us when `parent` (the host) dies,
    even if it dies without closing our stdin (a process it forked may hold the pipe open)."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)

    def host_died(signum: int, frame: FrameType | None) -> None:
        if os.getppid() != parent:  # the signal also comes when the host's thread that started us ends
            _kill_tree()
            os._exit(0)

    signal.signal(signal.SIGUSR1, host_died)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGUSR1)
    if os.getppid() != parent:  # the host went before the signal was armed
        host_died(signal.SIGUSR1, None)


# --- who commands run as ----------------------------------------------------------------------------------------
# In Docker the container starts as root with CAP_SETUID and CAP_SETGID only, and the agent becomes the command
# user at once, keeping those two capabilities (and nothing else). Every command then runs as that user with no
# supplementary group, while the host's snapshot operations (requests marked `store`) run as the same user in
# the group that alone can enter the snapshot index and store (root-owned, mode 0770): the commands a model
# runs can neither read nor write them, nor ptrace the git that does (its gid differs), and they get no
# capability (execve as a non-root user with no file capabilities and no-new-privileges keeps none).
_RUN_AS_ENV = "AGENTFLOW_RUN_AS"
_run_as: dict[str, int | None] = {"uid": None, "gid": None, "store_gid": None}
_PR_SET_KEEPCAPS = 8
_CAP_SETGID, _CAP_SETUID = 6, 7


def _become_command_user() -> None:
    """From `$AGENTFLOW_RUN_AS` (uid:gid:store_gid:store folder:..., set by the docker backend): close the
    store folders to all but root and the store's group, then become uid:gid with no supplementary group,
    keeping CAP_SETUID and CAP_SETGID to start commands and snapshot operations as their identities. Must run
    before any thread starts (capabilities are per thread)."""
    spec = os.environ.pop(_RUN_AS_ENV, "")
    if not spec or os.getuid() != 0:
        return
    ids, folders = spec.split(":")[:3], spec.split(":")[3:]
    uid, gid, store_gid = (int(part) for part in ids)
    for folder in folders:
        # the engine gives a tmpfs the mode of the image's folder under it; the mount's own mode is not kept
        os.chown(folder, 0, store_gid)
        os.chmod(folder, 0o770)
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_KEEPCAPS)")
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    keep = (1 << _CAP_SETGID) | (1 << _CAP_SETUID)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)(keep, keep, 0, 0, 0, 0)  # effective, permitted, inheritable (two words)
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    _run_as.update(uid=uid, gid=gid, store_gid=store_gid)


def _identity(req: dict[str, Any]) -> dict[str, Any]:
    """Popen arguments that start a `store` request (the host's snapshot operations) in the snapshot store's
    group; none for any other command, which runs as the agent is (the command user, no supplementary group,
    its capabilities gone at execve), so it keeps the fast vfork start that changing identity would cost."""
    if _run_as["uid"] is None or not req.get("store"):
        return {}
    return {"group": _run_as["store_gid"], "extra_groups": []}


# --- child reaping -------------------------------------------------------------------------------------------
# As PID 1 (or a child subreaper) the agent inherits every orphan; one reaper thread waits for all children
# and hands exit statuses to whoever registered the pid (unregistered pids are orphans and are simply reaped).
# re-entrant: the host-died signal handler kills the tree (`_kill_tree`, which lists under this lock) in the main
# thread, which may be inside `_kill_tree` already (stdin closed at the same moment)
_reap_lock = threading.RLock()


class _Exit:
    """A child's exit as the reaper hands it over: `ended` is set once `status` (os.wait's) is known."""

    def __init__(self) -> None:
        self.ended = threading.Event()
        self.status: int | None = None


_waiters: dict[int, _Exit] = {}  # pid -> its exit, for the command that waits for it
_early: dict[int, int] = {}  # pid -> status, for children that exited before they were registered
_spawned = threading.Event()
# request id -> pid of the command that request is running now (until it has ended)
_running: dict[object, int] = {}


def _reaper() -> None:
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            _spawned.wait(1.0)
            _spawned.clear()
            continue
        except InterruptedError:
            continue
        with _reap_lock:
            slot = _waiters.pop(pid, None)
            if slot is None:
                _early[pid] = status
                if len(_early) > 10000:
                    _early.clear()
            else:
                slot.status = status
                slot.ended.set()


# --- cgroup counters (say which limit stopped a command) ------------------------------------------------------
# kind: (the counter's key, its files under cgroup v2 and v1)
_COUNTERS = {
    "memory": ("oom_kill", ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")),
    "pids": ("max", ("/sys/fs/cgroup/pids.events", "/sys/fs/cgroup/pids/pids.events")),
}


def _counters() -> dict[str, int]:
    out = {}
    for kind, (key, places) in _COUNTERS.items():
        for path in places:
            try:
                with open(path) as fh:
                    for line in fh:
                        parts = line.split()
                        if len(parts) == 2 and parts[0] == key:
                            out[kind] = int(parts[1])
                if kind in out:
                    break
            except OSError:
                continue
    return out


class _Capture:
    """Keeps the first and last `limit // 2` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.half:
                del self.tail[: len(self.tail) - self.half]

    def result(self) -> tuple[str, int]:
        tail = self.tail[-self.half :] if len(self.tail) > self.half else self.tail
        omitted = self.total - len(self.head) - len(tail)
        text = self.head.decode("utf-8", "replace")
        if omitted > 0:
            text += f"\n[... {omitted} bytes omitted ...]\n"
        text += tail.decode("utf-8", "replace")
        return text, max(omitted, 0)


def _set_rlimits() -> None:
    for name, value in _state["rlimits"].items():
        with contextlib.suppress(ValueError, OSError, AttributeError):
            resource.setrlimit(getattr(resource, name), (value, value))


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    # Processes that left the group but stayed in the session (setpgid) go too.
    for other, fields in _proc_stats().items():
        if other != os.getpid() and len(fields) > 3 and fields[3] == str(pid):  # session id
            with contextlib.suppress(OSError):
                os.kill(other, signal.SIGKILL)


_SIMPLE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,- ")
# shell builtins and keywords: a command starting with one needs bash
_BASH_WORDS = (
    "cd export exit source . alias unset set shopt type command exec eval read wait jobs fg bg kill "
    "ulimit umask history declare typeset local return trap times hash help let time if then else fi "
    "for while until do done case esac function select builtin enable logout pushd popd dirs disown "
    "suspend readonly shift getopts test echo printf pwd"
)
_SHELL_WORDS = frozenset(_BASH_WORDS.split())


def _direct_argv(command: str, env: dict[str, str]) -> list[str] | None:
    """argv to exec without a shell when `command` is plain words (same result as bash -c, one process less)."""
    if not command or not set(command) <= _SIMPLE:
        return None
    words = command.split()
    if not words or "=" in words[0] or words[0] in _SHELL_WORDS:
        return None
    exe = words[0]
    if "/" not in exe:
        for d in env.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(":"):
            cand = os.path.join(d or ".", exe)
            if os.access(cand, os.X_OK) and not os.path.isdir(cand):
                exe = cand
                break
        else:
            return None  # let bash say "command not found"
    return [exe] + words[1:]


def op_exec(req: Request) -> Reply:
    """Run `command` with bash (or directly when it is plain words), or each argv of `argvs` in turn without
    a shell, stopping at the first failure (used for snapshots: one round trip, no shell)."""
    argvs = req.get("argvs")
    if not argvs:
        return _run(req, None)
    result: Reply = {}
    for argv in argvs:
        result = _run(req, argv)
        if result["exit_code"] != 0:
            break
    return result


def _run(req: Request, argv: list[str] | None) -> Reply:
    """Run one command (`argv`, or the request's command line) to its end, its timeout or its output limit;
    what it printed (capped), how it ended and which limit, if any, it hit."""
    env = {**os.environ, **_state["env"], **(req.get("env") or {})}
    limit = int(req.get("output_limit") or _state["output_limit"])
    results_r = results_w = None
    if req.get("results_fd"):
        # a side channel for structured results (the test harness's outcomes): it reaches the host through
        # this agent's signed replies, not through a file in the workspace that the code under test can edit
        results_r, results_w = os.pipe()
        env["AGENTFLOW_RESULTS_FD"] = str(results_w)
    before = _counters()
    start = time.monotonic()
    started = _spawn(req, argv, env, results_r, results_w)
    if isinstance(started, dict):
        return started
    proc, slot = started
    stdout, stderr = _pipes(proc)
    caps = {stdout.fileno(): _Capture(limit), stderr.fileno(): _Capture(limit)}
    deadline = start + float(req.get("timeout") or 120)
    try:
        timed_out, output_hit, results = _collect(proc, slot, caps, results_r, results_w, deadline)
    finally:
        with _reap_lock:
            _running.pop(req.get("id"), None)
    duration = time.monotonic() - start
    status = slot.status
    code = os.waitstatus_to_exitcode(status) if status is not None else -9
    proc.returncode = code  # the reaper has the status; keep Popen from polling for it
    out_cap, err_cap = caps.values()
    out, out_omitted = out_cap.result()
    err, err_omitted = err_cap.result()
    # read even after exit 0: an OOM kill inside a pipeline whose last command succeeds still counts
    limit_hit = _limit_hit(before, _counters(), out, err, output_hit=output_hit, timed_out=timed_out)
    extra: dict[str, str | None] = {}
    if results_r is not None:
        extra["results"] = results.decode("utf-8", "replace") if results is not None else None
    return {
        **extra,
        "exit_code": 124 if timed_out else code,
        "stdout": out,
        "stderr": err,
        "duration_s": duration,
        "timed_out": timed_out,
        "truncated": bool(out_omitted or err_omitted),
        "omitted_bytes": out_omitted + err_omitted,
        "limit_hit": limit_hit,
    }


def _spawn(
    req: Request, argv: list[str] | None, env: dict[str, str], results_r: int | None, results_w: int | None
) -> Reply | tuple[subprocess.Popen[bytes], _Exit]:
    """Start the command in its own session, registered with the reaper, fed its stdin (if any) by a thread;
    (process, its reaper slot), or the reply for a command that could not start."""
    cwd = _path(req.get("cwd") or _state["workdir"])
    stdin_data = req.get("stdin")
    try:
        with _reap_lock:  # hold it so the reaper cannot lose this pid before it is registered
            if argv is None:
                argv = _direct_argv(req["command"], env) or ["bash", "-c", req["command"]]
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                pass_fds=(results_w,) if results_w is not None else (),
                preexec_fn=_set_rlimits if _state["rlimits"] else None,  # noqa: PLW1509 - local backend only
                **_identity(req),
            )
            slot = _Exit()
            _running[req.get("id")] = proc.pid
            if proc.pid in _early:
                slot.status = _early.pop(proc.pid)
                slot.ended.set()
            else:
                _waiters[proc.pid] = slot
        _spawned.set()
    except OSError as exc:
        _close_fds(results_r, results_w)
        if isinstance(exc, FileNotFoundError):
            return {"exit_code": 127, "stdout": "", "stderr": f"{exc}\n", "duration_s": 0.0}
        limit_hit, stderr = "pids" if exc.errno == 11 else None, f"cannot start: {exc}\n"
        return {"exit_code": 126, "stderr": stderr, "duration_s": 0.0, "limit_hit": limit_hit}
    with contextlib.suppress(OSError), open(f"/proc/{proc.pid}/oom_score_adj", "w") as fh:
        fh.write("1000")  # under memory pressure the command dies, not the agent
    if stdin_data is not None:
        stdin = proc.stdin
        assert stdin is not None  # a pipe when there is data to feed

        def feed() -> None:
            with contextlib.suppress(OSError):
                stdin.write(stdin_data.encode())
            with contextlib.suppress(OSError):
                stdin.close()

        threading.Thread(target=feed, daemon=True).start()
    return proc, slot


def _pipes(proc: subprocess.Popen[bytes]) -> tuple[IO[bytes], IO[bytes]]:
    """The command's stdout and stderr (both are pipes: see `_spawn`)."""
    assert proc.stdout is not None and proc.stderr is not None
    return proc.stdout, proc.stderr


def _collect(
    proc: subprocess.Popen[bytes],
    slot: _Exit,
    caps: dict[int, _Capture],
    results_r: int | None,
    results_w: int | None,
    deadline: float,
) -> tuple[bool, bool, bytearray | None]:
    """Read the command's stdout and stderr into `caps` (and its results pipe) until it has exited and its
    pipes are drained, its deadline passes or its output passes the kill limit; the process group is killed
    in the last two cases (and when background jobs still hold its pipes). (timed out, output limit hit,
    the results read: None when there was no results pipe or what came was too large)."""
    kill_bytes = int(_state["output_kill"])
    sel = selectors.DefaultSelector()
    for f in _pipes(proc):
        os.set_blocking(f.fileno(), False)
        sel.register(f.fileno(), selectors.EVENT_READ)
    results: bytearray | None = None
    if results_r is not None and results_w is not None:
        os.close(results_w)  # the command holds the only write end now
        results = bytearray()
        os.set_blocking(results_r, False)
        sel.register(results_r, selectors.EVENT_READ)
    timed_out = False
    output_hit = False
    exited_at: float | None = None
    open_fds = set(caps)
    while open_fds:
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        if slot.ended.is_set() and exited_at is None:
            exited_at = now
        if exited_at is not None and now - exited_at > 0.2:
            break  # the command is done; background jobs still hold its pipes
        wait = min(deadline - now, 0.05 if exited_at is None else 0.2)
        for key, _ in sel.select(wait):
            fd = key.fd
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                sel.unregister(fd)
                open_fds.discard(fd)
                continue
            if fd == results_r:
                if results is not None:
                    results += chunk
                    if len(results) > _RESULTS_LIMIT:
                        results = None  # too large to be honest output of the harness: say so, keep nothing
                continue
            caps[fd].add(chunk)
        if sum(c.total for c in caps.values()) > kill_bytes:
            output_hit = True
            break
    if timed_out or output_hit or open_fds:
        _kill_group(proc.pid)
    if not slot.ended.wait(5):
        _kill_group(proc.pid)
        slot.ended.wait(5)
    sel.close()
    for f in _pipes(proc):
        with contextlib.suppress(OSError):
            f.close()
    if results_r is not None:
        results = _drain(results_r, results)
    _close_fds(results_r)
    return timed_out, output_hit, results


def _limit_hit(
    before: dict[str, int], after: dict[str, int], out: str, err: str, output_hit: bool, timed_out: bool
) -> str | None:
    """Which limit ended the command, if any: the cgroup's memory or pids counters rose, else its output, the
    disk, its timeout or a fork refused (from what it printed)."""
    for kind in ("pids", "memory"):
        if after.get(kind, 0) > before.get(kind, 0):
            return kind
    if output_hit:
        return "output"
    if "No space left on device" in err or "No space left on device" in out:
        return "disk"
    if timed_out:
        return "timeout"
    if "fork: retry" in err or "Resource temporarily unavailable" in err:
        return "pids"
    return None


def _path(p: str) -> str:
    return p if os.path.isabs(p) else os.path.join(_state["workdir"], p)


def op_read(req: Request) -> Reply:
    path = _path(req["path"])
    limit = int(req.get("limit") or 50_000_000)
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{req['path']} is larger than {limit} bytes")
    return {"data": base64.b64encode(data).decode()}


def _drain(fd: int, buf: bytearray | None) -> bytearray | None:
    """Whatever the command wrote to the side channel and the loop has not read yet."""
    while buf is not None:
        try:
            chunk = os.read(fd, 1 << 16)
        except (BlockingIOError, OSError):
            break
        if not chunk:
            break
        buf += chunk
        if len(buf) > _RESULTS_LIMIT:
            return None
    return buf


def _close_fds(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def op_write(req: Request) -> Reply:
    path = _path(req["path"])
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(base64.b64decode(req["data"]))
    if req.get("mode") is not None:
        os.chmod(path, int(req["mode"]))
    return {}


def op_list(req: Request) -> Reply:
    root = _path(req.get("path") or ".")
    cap = int(req.get("max_entries") or 10000)
    entries: list[dict[str, object]] = []
    if not os.path.isdir(root):
        raise NotADirectoryError(f"{req.get('path')} is not a directory")
    for full in _listed(root, bool(req.get("recursive"))):
        try:
            st = os.lstat(full)
        except OSError:
            continue
        is_dir = stat.S_ISDIR(st.st_mode)
        entries.append(
            {"path": os.path.relpath(full, root), "is_dir": is_dir, "size": 0 if is_dir else st.st_size}
        )
        if len(entries) >= cap:
            return {"entries": entries, "truncated": True}
    return {"entries": entries, "truncated": False}


def _listed(root: str, recursive: bool) -> Iterator[str]:
    """The paths in folder `root`, sorted; with `recursive`, those below it too (not inside `.git`)."""
    if not recursive:
        yield from (os.path.join(root, name) for name in sorted(os.listdir(root)))
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        yield from (os.path.join(dirpath, name) for name in dirnames + sorted(filenames))


def op_untar(req: Request) -> Reply:
    dest = _path(req.get("dest") or ".")
    os.makedirs(dest, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(req["data"]))) as tar:
        members: list[tarfile.TarInfo] = []
        for m in tar.getmembers():
            name = os.path.normpath(m.name)
            if name.startswith("..") or os.path.isabs(name) or m.isdev():
                continue
            m.uid = m.gid = os.getuid()
            members.append(m)
        tar.extractall(dest, members=members, numeric_owner=True)
    return {"count": len(members)}


def op_hello(req: Request) -> Reply:
    for key in ("workdir", "env", "rlimits", "output_limit", "output_kill"):
        if key in req:
            _state[key] = req[key]
    os.makedirs(_state["workdir"], exist_ok=True)
    if req.get("key") and _key["value"] is None:  # set once: a later hello cannot change it
        _key["value"] = bytes.fromhex(req["key"])
    return {
        "pid": os.getpid(),
        "python": sys.version.split()[0],
        "dumpable": _state.get("dumpable", True),
        "store_gid": _run_as["store_gid"],
    }


def op_end_processes(req: Request) -> Reply:
    """End every process in the sandbox but this agent and the commands of the requests named in `spare`
    (ones the host still waits for; what runs below them stays too). A search branch gives up the sandbox
    this way: nothing it started, detached or not, is left to touch the next branch's workspace."""
    ended, left = _kill_tree(set(req.get("spare") or ()))
    if left:
        raise RuntimeError(f"{left} processes outlived five seconds of SIGKILL passes; start a new sandbox")
    return {"ended": ended}


def op_wipe(req: Request) -> Reply:
    """Empty each folder of `paths`: every entry, whatever its kind or mode (a folder its owner closed is opened
    first); with `ipc` (a container's own IPC namespace, never the host's), remove the System V IPC objects
    left; then run `argvs` as `exec` does, if given (a search branch's scratch places are put back so: emptied
    here, its files written by the git that `argvs` runs)."""
    removed = sum(_empty(top) for top in req.get("paths") or ())
    if req.get("ipc") and _ipc_objects_left():
        subprocess.run(["ipcrm", "--all"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return {**(op_exec(req) if req.get("argvs") else {}), "removed": removed}


def _empty(top: str) -> int:
    """Remove everything in folder `top` (not `top` itself); how many entries there were at its top."""
    import shutil

    for path, dirnames, _ in os.walk(top):
        for name in dirnames:  # top-down: each folder is opened before the walk goes into it
            full = os.path.join(path, name)
            mode = os.lstat(full).st_mode
            if stat.S_ISDIR(mode) and mode & 0o700 != 0o700:
                os.chmod(full, stat.S_IMODE(mode) | 0o700)
    count = 0
    with os.scandir(top) as entries:
        for entry in entries:
            count += 1
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
    return count


def _ipc_objects_left() -> bool:
    """Whether any System V shared memory segment, message queue or semaphore set exists (they outlive the
    processes that made them)."""
    for kind in ("shm", "msg", "sem"):
        try:
            with open(f"/proc/sysvipc/{kind}") as fh:
                if len(fh.read().splitlines()) > 1:
                    return True
        except OSError:
            continue
    return False


def op_shutdown(req: Request) -> Reply:
    """Kill every process the commands started (detached background jobs included)."""
    _kill_tree()
    return {}


OPS: dict[str, Callable[[Request], Reply]] = {
    "exec": op_exec,
    "read": op_read,
    "write": op_write,
    "list": op_list,
    "untar": op_untar,
    "hello": op_hello,
    "end_processes": op_end_processes,
    "wipe": op_wipe,
    "shutdown": op_shutdown,
}


def _reply(obj: Reply) -> None:
    body = json.dumps(obj).encode()
    key = _key["value"]
    if key is not None:
        body = hmac.new(key, body, hashlib.sha256).hexdigest().encode() + b" " + body
    with _out_lock:
        sys.stdout.buffer.write(body + b"\n")
        sys.stdout.buffer.flush()


def _handle(req: Request) -> None:
    rid = req.get("id")
    try:
        result = {**OPS[req["op"]](req), "id": rid, "ok": True}
    except KeyError as exc:
        result = {"id": rid, "ok": False, "error": f"unknown op or missing field {exc}"}
    except Exception as exc:  # noqa: BLE001 - every failure becomes a reply; the agent keeps serving
        kind = exc.__class__.__name__
        result = {"id": rid, "ok": False, "error": f"{kind}: {exc}", "kind": kind}
    _reply(result)


def main() -> None:
    parent = os.getppid()  # the host (0 as a container's PID 1)
    _become_command_user()
    # not dumpable: our /proc entries become root's and ptrace needs CAP_SYS_PTRACE
    _state["dumpable"] = not _prctl(_PR_SET_DUMPABLE, 0)
    for name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGPIPE"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    if os.getpid() != 1:
        _keep_the_tree(parent)
    threading.Thread(target=_reaper, daemon=True).start()
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            _kill_tree()  # the host went away: no command outlives it
            break  # stop, so the container stops and is removed
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
        except ValueError:
            _reply({"id": None, "ok": False, "error": "bad request line"})
            continue
        try:
            threading.Thread(target=_handle, args=(req,), daemon=True).start()
        except RuntimeError:  # no thread left: the pids limit is exhausted by the sandbox's own processes
            error = "the sandbox is out of processes (pids limit); kill some or start a new sandbox"
            _reply({"id": req.get("id"), "ok": False, "kind": "PidsLimit", "error": error})
    os._exit(0)


main()
