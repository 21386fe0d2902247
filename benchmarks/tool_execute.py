"""Overhead of the tool layer: `ToolRegistry.execute` on trivial sync and async tools, with and without
the SQLite journal, and the cost of `@tool` itself (schema generation); then the median wall time of one
call of a trivial tool (`add`) through the registry: native, and on an MCP server (the `mcp` SDK's
server, tests/mcp/fixture_server.py) over stdio and over streamable HTTP on 127.0.0.1 (targets: <= 5 ms
and <= 10 ms). The MCP figures are null without the `agentflow[mcp]` extra.

Prints one JSON object (microseconds per operation; `*_ms_p50` in milliseconds).
Run: .venv/bin/python benchmarks/tool_execute.py [CALLS]
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

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
    out["native_call_ms_p50"] = await call_ms_p50(registry, "add", min(calls, 500))
    out.update(await mcp_figures(min(calls, 500)))
    return out


FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "mcp" / "fixture_server.py"


async def call_ms_p50(registry: ToolRegistry, name: str, calls: int) -> float:
    """Median milliseconds of one `execute` (after 20 warm-up calls)."""
    times = []
    for i in range(calls + 20):
        start = time.perf_counter()
        result = await registry.execute(ToolCall(id=str(i), name=name, arguments={"a": i, "b": 1}))
        times.append(time.perf_counter() - start)
        assert result.ok, result.text
    return round(statistics.median(times[20:]) * 1e3, 3)


async def mcp_figures(calls: int) -> dict[str, float | None]:
    try:
        import mcp  # noqa: F401
    except ImportError:
        return {"mcp_stdio_call_ms_p50": None, "mcp_http_call_ms_p50": None}
    from agentflow.serving.ports import pick_free_port

    out: dict[str, float | None] = {}
    async with ToolRegistry() as registry:
        await registry.add_mcp({"command": [sys.executable, str(FIXTURE)], "prefix": "stdio_"})
        out["mcp_stdio_call_ms_p50"] = await call_ms_p50(registry, "stdio_add", calls)
    port = pick_free_port()
    server = subprocess.Popen([sys.executable, str(FIXTURE), "--http", str(port)], env=dict(os.environ),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await asyncio.to_thread(_wait_listening, port)
        async with ToolRegistry() as registry:
            await registry.add_mcp(f"http://127.0.0.1:{port}/mcp", prefix="http_")
            out["mcp_http_call_ms_p50"] = await call_ms_p50(registry, "http_add", calls)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return out


def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError("the MCP fixture server never listened")


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))))
