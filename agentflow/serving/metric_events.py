"""A server's metrics (`metrics.summarize`) written to a run's events as `server.metrics`: once, or every few
seconds while a block runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from agentflow.events.kinds import ServerMetrics

if TYPE_CHECKING:
    from agentflow.events import EventLog
    from agentflow.serving.server import ServerHandle


def emit_metrics_sync(handle: ServerHandle, events: EventLog, *, node_id: str | None = None,
                      **extra: Any) -> dict[str, Any]:
    """Read the server's metrics once and write a `server.metrics` event (plus `extra`); returns its data.
    For synchronous callers (e.g. a progress callback after each task)."""
    data: dict[str, Any] = {"server": handle.kind, "model": handle.model, **extra}
    try:
        data.update(handle.metrics_sync())
    except Exception as exc:  # noqa: BLE001 - metrics are advisory: record why they are missing
        data["error"] = f"{type(exc).__name__}: {exc}"[:300]
    events.write(ServerMetrics(node_id=node_id, **data))
    return data


async def emit_metrics(handle: ServerHandle, events: EventLog, *, node_id: str | None = None,
                       **extra: Any) -> dict[str, Any]:
    """`emit_metrics_sync` from an event loop (the metrics are read in a thread)."""
    return await asyncio.to_thread(emit_metrics_sync, handle, events, node_id=node_id, **extra)


@contextlib.asynccontextmanager
async def report_metrics(handle: ServerHandle, events: EventLog, *, interval_s: float = 5.0,
                         node_id: str | None = None) -> AsyncIterator[None]:
    """Write `server.metrics` events every `interval_s` seconds while the block runs, and once at its end."""

    async def loop() -> None:
        while True:
            await asyncio.sleep(interval_s)
            if handle.alive:
                await emit_metrics(handle, events, node_id=node_id)

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if handle.alive:
            await emit_metrics(handle, events, node_id=node_id)
