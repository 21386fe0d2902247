"""Overhead of the tool layer: `ToolRegistry.execute` on trivial sync and async tools, with and without
the SQLite journal, and the cost of `@tool` itself (schema generation).

Prints one JSON object of microseconds per operation.
Run: .venv/bin/python benchmarks/tool_execute.py [CALLS]
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from agentflow.events import EventLog
from agentflow.models.base import ToolCall
from agentflow.tools import SqliteToolJournal, ToolContext, ToolRegistry, tool


def add(a: int, b: int = 1) -> int:
    """Add two integers.

    Args:
        a: First.
        b: Second.
    """
    return a + b


async def add_async(a: int, b: int = 1) -> int:
    """Add two integers."""
    return a + b


async def per_call_us(registry: ToolRegistry, name: str, calls: int, **kw: object) -> float:
    start = time.perf_counter()
    for i in range(calls):
        await registry.execute(ToolCall(id=str(i), name=name, arguments={"a": i}), **kw)  # type: ignore[arg-type]
    return round((time.perf_counter() - start) / calls * 1e6, 1)


async def main(calls: int) -> dict[str, float | int]:
    start = time.perf_counter()
    for _ in range(100):
        tool(add)
    decorate_us = round((time.perf_counter() - start) / 100 * 1e6, 1)
    registry = ToolRegistry([tool(add), tool(add_async)])
    ctx = ToolContext(events=EventLog())
    out: dict[str, float | int] = {"calls": calls, "decorate_us": decorate_us}
    out["execute_sync_us"] = await per_call_us(registry, "add", calls, ctx=ctx)
    out["execute_async_us"] = await per_call_us(registry, "add_async", calls, ctx=ctx)
    with tempfile.TemporaryDirectory() as tmp, SqliteToolJournal(Path(tmp) / "journal.db") as journal:
        start = time.perf_counter()
        for i in range(calls):
            call = ToolCall(id=str(i), name="add_async", arguments={"a": i})
            await registry.execute(call, ctx, journal=journal, key=f"t:n:0:{i}")
        out["execute_journaled_us"] = round((time.perf_counter() - start) / calls * 1e6, 1)
        start = time.perf_counter()
        for i in range(calls):
            call = ToolCall(id=str(i), name="add_async", arguments={"a": i})
            await registry.execute(call, ctx, journal=journal, key=f"t:n:0:{i}")
        out["execute_replayed_us"] = round((time.perf_counter() - start) / calls * 1e6, 1)
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))))
