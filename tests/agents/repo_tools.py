"""A small tool pack for the agent tests: real file and process effects in a workspace folder.

The workspace root is `ctx.state["root"]` (set by the `workspace` fixture)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from agentflow.errors import ToolError
from agentflow.tools import ToolContext, tool


def _root(ctx: ToolContext) -> Path:
    return Path(ctx.state["root"])


@tool
def list_files(ctx: ToolContext) -> str:
    """List the files of the workspace."""
    return "\n".join(sorted(p.name for p in _root(ctx).iterdir() if p.is_file()))


@tool
def read_file(path: str, ctx: ToolContext) -> str:
    """Read a file of the workspace.

    Args:
        path: File name relative to the workspace.
    """
    target = _root(ctx) / path
    if not target.is_file():
        raise ToolError(f"{path}: no such file")
    return target.read_text()


@tool
def write_file(path: str, content: str, ctx: ToolContext) -> str:
    """Write (replace) a file of the workspace.

    Args:
        path: File name relative to the workspace.
        content: The new content.
    """
    (_root(ctx) / path).write_text(content)
    return f"wrote {len(content)} characters to {path}"


@tool
def run_check(ctx: ToolContext) -> str:
    """Run check.py in the workspace and report its exit code and output."""
    proc = subprocess.run(
        [sys.executable, "check.py"], check=False, cwd=_root(ctx), capture_output=True, text=True, timeout=30
    )
    return f"exit code {proc.returncode}\n{proc.stdout}{proc.stderr}"


@tool
async def wait(seconds: float) -> str:
    """Wait a while (for long-running work).

    Args:
        seconds: How long to wait.
    """
    await asyncio.sleep(seconds)
    return f"waited {seconds}s"
