"""An MCP server written with the `mcp` SDK's server API, for the client tests and the benchmark.

    python tests/mcp/fixture_server.py              # stdio
    python tests/mcp/fixture_server.py --http PORT  # streamable HTTP on 127.0.0.1:PORT/mcp

With FIXTURE_PID_FILE set it writes its process id there once it runs (tests kill it with SIGKILL); with
FIXTURE_RECORD_FILE set, `record` and `stall` append a line there.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("fixture")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def whoami() -> str:
    """The server's process id and the value of FIXTURE_SECRET (to check what environment it got)."""
    return f"pid={os.getpid()} secret={os.environ.get('FIXTURE_SECRET', '-')} home={'HOME' in os.environ}"


def _note(line: str) -> None:
    path = os.environ.get("FIXTURE_RECORD_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


@server.tool()
def record(label: str) -> str:
    """Append a line to the file FIXTURE_RECORD_FILE names (a side effect the tests count)."""
    _note(label)
    return f"recorded {label}"


@server.tool()
def big(chars: int) -> str:
    """A very long answer."""
    return "x" * chars


@server.tool()
async def stall(seconds: float) -> str:
    """Take this long to answer (times FIXTURE_STALL_SCALE when set)."""
    _note(f"stall {seconds:g}")
    await asyncio.sleep(seconds * float(os.environ.get("FIXTURE_STALL_SCALE", "1")))
    return "finally"


@server.tool()
def fail(message: str) -> str:
    """Always fails with the message."""
    raise ValueError(message)


@server.tool()
async def count(n: int, ctx: Context) -> str:
    """Count to n, reporting progress."""
    for i in range(n):
        await ctx.report_progress(i + 1, n, f"{i + 1} of {n}")
    return f"counted to {n}"


def main() -> None:
    pid_file = os.environ.get("FIXTURE_PID_FILE")
    if pid_file:
        Path(pid_file).write_text(str(os.getpid()))
    if sys.argv[1:2] == ["--http"]:
        import anyio

        port = int(sys.argv[2])
        anyio.run(lambda: server.run_streamable_http_async(host="127.0.0.1", port=port))
    else:
        server.run()


if __name__ == "__main__":
    main()
