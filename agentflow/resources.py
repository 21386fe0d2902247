"""Locate the run-time data folders (`tools/`, `workflows/`, `sandboxes/`).

In a wheel they live in `agentflow/_bundled/`; in a source checkout they are the top-level folders.
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Path of the bundled data folder `name` (one of tools, workflows, sandboxes)."""
    bundled = _PKG / "_bundled" / name
    if bundled.is_dir():
        return bundled
    return _PKG.parent / name
