"""A published package's source as a task repository: its sdist from PyPI, pinned by sha256, unpacked as published.

The example task sets (`examples/real-tasks`, `examples/wide-tasks`) are built from these; so can a user's own set
of tasks from published packages (`agentflow tasks synth` on the unpacked tree).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

LEFT_OUT = ("PKG-INFO", "*.egg-info", ".gitignore", ".gitattributes", "__pycache__", "*.pyc")
"""What of an sdist a task repository leaves out: what the sdist build generated, and git's metadata files
(nested in another repository they would apply to its files: tabulate's `.gitignore` ignores a source file)."""


def fetch_sdist(name: str, version: str, sha256: str, cache: Path) -> Path:
    """The sdist of `name==version`, downloaded from PyPI once into `cache` (`pip download`), checked against
    its pinned `sha256` (a mismatch stops the build: the file is not the one the tasks were made from)."""
    cache.mkdir(parents=True, exist_ok=True)
    wanted = f"{name}-{version}.tar.gz".lower().replace("_", "-")
    found = [p for p in cache.glob("*.tar.gz") if p.name.lower().replace("_", "-") == wanted]
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        f"{name}=={version}", "-d", str(cache)], check=True)
        return fetch_sdist(name, version, sha256, cache)
    digest = hashlib.sha256(found[0].read_bytes()).hexdigest()
    if digest != sha256:
        raise SystemExit(f"{found[0]}: sha256 {digest} is not the pinned {sha256}")
    return found[0]


def unpack_sdist(archive: Path, dest: Path) -> None:
    """The sdist's tree as published in `dest`, less `LEFT_OUT` (members outside the tree refused: `data` filter)."""
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(archive) as tf:
        tf.extractall(tmp, filter="data")
        (top,) = Path(tmp).iterdir()
        shutil.copytree(top, dest, ignore=shutil.ignore_patterns(*LEFT_OUT))


__all__ = ["LEFT_OUT", "fetch_sdist", "unpack_sdist"]
