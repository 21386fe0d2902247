"""Directories that travel to worker nodes through the object store (a task's repository, its wheelhouse).

`pack_dir` makes a gzipped tar of a directory (caches and byte-code left out); `unpack_dir` unpacks it once
per node under the cache folder, keyed by its digest, and returns where. Unpacking refuses members that
would land outside the target (tarfile's `data` filter), so a packed tree cannot write elsewhere on a node.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from agentflow.config import cache_dir

_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
_SKIP_SUFFIXES = (".pyc", ".pyo")


def _members(src: Path) -> list[Path]:
    out: list[Path] = []
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        out.extend(Path(root) / name for name in sorted(files) if not name.endswith(_SKIP_SUFFIXES))
    return out


def pack_dir(src: str | Path) -> bytes:
    """A gzipped tar of `src`'s files (git metadata included, caches and byte-code left out)."""
    src = Path(src)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for path in _members(src):
            if path.is_file() and not path.is_symlink():
                info = tar.gettarinfo(str(path), arcname=str(path.relative_to(src)))
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                with open(path, "rb") as fh:
                    tar.addfile(info, fh)
    return buf.getvalue()


def unpack_dir(blob: bytes, name: str, root: str | Path | None = None) -> Path:
    """Unpack a `pack_dir` blob to `<root>/<digest>/<name>` (once: a later call finds it) and return that path."""
    root = Path(root) if root is not None else cache_dir() / "shipped"
    digest = hashlib.sha256(blob).hexdigest()[:20]
    dest = root / digest / name
    if dest.is_dir():
        return dest
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".unpacking-", dir=root))
    try:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
            tar.extractall(tmp / name, filter="data")
        (root / digest).mkdir(exist_ok=True)
        try:
            (tmp / name).rename(dest)
        except OSError:  # another worker of this node unpacked it first
            if not dest.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest
