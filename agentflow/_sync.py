"""Synchronous entry points (`run_sync`) over the async library (layer 1): the one check they share."""

from __future__ import annotations

import asyncio

from agentflow.errors import UserError


def require_no_running_loop(name: str, instead: str) -> None:
    """Raise a UserError when called with an event loop running in this thread: blocking on a run there
    would stall that loop (and asyncio refuses to nest loops)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UserError(
        f"{name}() cannot run inside a running event loop (async code, Jupyter)", hint=f"use `await {instead}`"
    )
