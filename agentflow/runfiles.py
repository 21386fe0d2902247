"""Files of a run folder, written and read without following a link the folder brings.

A run folder is data that may come from elsewhere (a colleague's run, a downloaded bundle): a `view.html`,
`events.jsonl` or `usage.json` in it may be a symbolic link to a file of the user's, or a FIFO. Every writer
into a run folder goes through this module, which

- replaces a file through a fresh temporary name opened `O_CREAT | O_EXCL | O_NOFOLLOW` (a link planted
  under any name is never opened) and renamed over the target, refused when the target is a link or not a
  regular file;
- appends with `O_APPEND | O_NOFOLLOW | O_NONBLOCK` to a regular file only (a FIFO is refused, not waited on);
- lets SQLite open a database only after checking it (and its `-wal`/`-journal`) is a regular file or absent;

and every reader of a file for a page opens it `O_NOFOLLOW` and reads it only when it is a regular file.
Each refusal is a `UserError` naming the file.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO

from agentflow.errors import UserError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_HINT = "the run folder holds a file agentflow did not write; remove it (or use another -o folder)"


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "a file" if stat.S_ISREG(mode) else "a special file"


def check_regular(path: str | Path) -> Path:
    """`path` when it is absent or a regular file (not a link, folder, FIFO or device), else a UserError."""
    return _check_entry(path, stat.S_ISREG, "not a regular file: agentflow neither writes nor reads through it")


def check_folder_entry(path: str | Path) -> Path:
    """`path` when it is absent or a real folder (not a link to one), else a UserError."""
    return _check_entry(path, stat.S_ISDIR, "not a folder: agentflow does not write through it")


def _check_entry(path: str | Path, wanted: Callable[[int], bool], refusal: str) -> Path:
    p = Path(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return p
    except OSError as exc:
        raise UserError(f"cannot use {p}: {exc.strerror or exc.__class__.__name__}", hint=_HINT) from None
    if not wanted(st.st_mode):
        raise UserError(f"{p} is {_kind(st.st_mode)}, {refusal}", hint=_HINT)
    return p


def make_folder(path: str | Path) -> Path:
    """`path` made (with its parents) when missing; refused when it is a link or a file."""
    p = check_folder_entry(path)
    p.mkdir(parents=True, exist_ok=True)
    return check_folder_entry(p)


def replace_file(path: str | Path, data: bytes | str) -> Path:
    """Replace `path` atomically: written under a fresh name beside it, then renamed over it (a reader or a
    `kill -9` never sees half a file). Refused when `path` is a link or not a regular file."""
    target = check_regular(path)
    check_folder_entry(target.parent)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644)
    except OSError as exc:
        raise UserError(f"cannot write {target}: {exc.strerror or exc.__class__.__name__}", hint=_HINT) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        os.replace(tmp, target)  # renames the entry: a link put at `target` meanwhile is replaced, not followed
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def open_append(path: str | Path) -> IO[str]:
    """`path` opened for appending text (created when missing); refused when it is a link or not a regular
    file (a FIFO is refused at once, not waited on)."""
    p = check_regular(path)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _NONBLOCK | _CLOEXEC, 0o644)
    except OSError as exc:
        raise UserError(f"cannot append to {p}: {exc.strerror or exc.__class__.__name__}", hint=_HINT) from None
    return os.fdopen(_regular(fd, p, "write"), "a", encoding="utf-8")


def truncate_file(path: str | Path, size: int) -> None:
    """Cut the regular file `path` to `size` bytes (never through a link)."""
    p = check_regular(path)
    fd = _regular(os.open(p, os.O_WRONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC), p, "write")
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)


def _regular(fd: int, p: Path, verb: str) -> int:
    """`fd` (opened non-blocking: a FIFO is not waited on) made blocking when it is a regular file; else it is
    closed and a UserError raised."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UserError(f"{p} is not a regular file: agentflow does not {verb} through it", hint=_HINT)
    os.set_blocking(fd, True)
    return fd


def _open_read(path: str | Path) -> int:
    """A descriptor of the regular file `path` opened for reading; FileNotFoundError when absent, a UserError
    when it is a link or not a regular file (nothing is read through it)."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError:
        check_regular(p)  # names a link or a special file
        raise
    return _regular(fd, p, "read")


def open_read(path: str | Path) -> IO[str]:
    """The regular file `path` opened for reading text (undecodable bytes replaced); FileNotFoundError when
    absent, a UserError when it is a link or not a regular file (nothing is read through it)."""
    return os.fdopen(_open_read(path), "r", encoding="utf-8", errors="replace")


def read_bytes(path: str | Path) -> bytes | None:
    """The bytes of the regular file `path`, None when it is absent; a UserError when it is a link or not a
    regular file (nothing is read through it)."""
    try:
        fd = _open_read(path)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def read_text(path: str | Path) -> str | None:
    """`read_bytes` as text (undecodable bytes replaced), None when absent."""
    data = read_bytes(path)
    return None if data is None else data.decode("utf-8", errors="replace")


def read_inside(root: str | Path, path: str | Path) -> str | None:
    """The text of `path`, a regular file inside the folder `root` reached through real folders only (no
    link on the way out of `root`); None when absent."""
    base, p = Path(root), Path(path)
    parts = p.relative_to(base).parts if p.is_relative_to(base) else ("..",)
    if ".." in parts:
        raise UserError(f"{p} is outside the run folder {base}", hint=_HINT)
    folder = base
    for part in parts[:-1]:
        folder = folder / part
        check_folder_entry(folder)
    return read_text(p)


def check_database(path: str | Path) -> Path:
    """`path` (a SQLite file of a run folder) when it and its `-wal`, `-shm` and `-journal` companions are
    regular files or absent: SQLite follows links and would write through them."""
    p = Path(path)
    for suffix in ("", "-wal", "-shm", "-journal"):
        check_regular(Path(str(p) + suffix))
    return p
