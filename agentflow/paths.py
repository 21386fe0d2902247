"""File names built from ids that come from input files (instance ids, model names).

An id may be anything a JSONL line holds: `../../etc`, an absolute path, `x/1` next to `x_1`. `path_component`
turns it into one path component that stays inside its parent folder and never equals the component of
another id: an injective escaping (`%XX` for every byte outside `[A-Za-z0-9_.-]`, `%` itself included, and
for a leading dot), so `x/1` -> `x%2F1`, `x_1` -> `x_1`, `..` -> `%2E.`. Ordinary SWE-bench ids
(`astropy__astropy-12907`) come out unchanged.
"""

from __future__ import annotations

from pathlib import Path

from agentflow.errors import UserError

_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_MAX_BYTES = 200  # file systems allow 255; leave room for suffixes


def path_component(value: str, what: str = "id") -> str:
    """`value` as a single, safe, unique path component; a UserError when it cannot be one."""
    if not isinstance(value, str) or not value:
        raise UserError(f"an empty {what} cannot name a folder", hint=f"give every entry a non-empty {what}")
    name = "".join(chr(byte) if byte in _SAFE and not (i == 0 and byte == ord(".")) else f"%{byte:02X}"
                   for i, byte in enumerate(value.encode("utf-8")))
    if len(name) > _MAX_BYTES:
        raise UserError(
            f"{what} {value[:40]!r}... is too long to name a folder ({len(name)} bytes escaped, at most {_MAX_BYTES})",
            hint=f"shorten the {what}",
        )
    return name


def child_dir(root: str | Path, value: str, what: str = "id") -> Path:
    """`root / path_component(value)`: a folder for `value` that is inside `root` whatever `value` holds."""
    return Path(root) / path_component(value, what)
