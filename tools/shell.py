"""Pack `shell`: run a bash command in the run's sandbox."""

from __future__ import annotations

from agentflow.tools import ToolResult, tool
from agentflow.tools.context import ToolContext


def describe(res: object) -> str:
    """Model-facing text of an ExecResult: output, then one line on how it ended."""
    from agentflow.sandbox.base import ExecResult

    assert isinstance(res, ExecResult)
    parts = [res.stdout.rstrip("\n")]
    if res.stderr.strip():
        parts.append(res.stderr.rstrip("\n"))
    body = "\n".join(p for p in parts if p) or "(no output)"
    status = f"exit code {res.exit_code}"
    if res.timed_out:
        status = f"timed out after {res.duration_s:.0f}s and was killed"
    if res.limit_hit and res.limit_hit != "timeout":
        status += f"; stopped by the sandbox's {res.limit_hit} limit"
    if res.truncated:
        status += f"; {res.omitted_bytes} bytes of output omitted"
    return f"{body}\n[{status}]"


@tool(timeout=None)
async def bash(
    command: str, ctx: ToolContext, timeout: float | None = None, cwd: str | None = None
) -> ToolResult:
    """Run a bash command in the sandbox's workspace and return its output and exit code.

    Args:
        command: the command line, e.g. "ls -la" or "python -m pytest -x tests/test_a.py".
        timeout: seconds before the command's whole process group is killed (default: the sandbox's limit).
        cwd: working directory, relative to the workspace (default: the workspace).
    """
    res = await ctx.require_sandbox().exec(command, cwd=cwd, timeout=timeout)
    return ToolResult(
        ok=res.ok,
        text=describe(res),
        data=res.model_dump(),
        error=None if res.ok else res.limit_hit or f"exit {res.exit_code}",
    )
