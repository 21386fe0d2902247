"""Pack `patch`: apply a unified diff to the sandbox's workspace."""

from __future__ import annotations

from agentflow.tools import ToolResult, tool
from agentflow.tools.context import ToolContext


@tool(timeout=120)
async def apply_patch(diff: str, ctx: ToolContext) -> ToolResult:
    """Apply a unified diff (as produced by `git diff` or `diff -u`, paths relative to the workspace).

    Args:
        diff: the patch text, with ---/+++ headers and @@ hunks.
    """
    res = await ctx.require_sandbox().apply_patch(diff)
    text = (res.stdout + res.stderr).strip()
    if res.ok:
        return ToolResult(text=f"patch applied\n{text}".strip(), data={"applied": True, "output": text})
    return ToolResult(
        ok=False,
        text=f"ToolError: the patch does not apply; nothing was changed.\n{text}",
        error="patch does not apply",
        data={"applied": False, "output": text},
    )
