"""Pack `search`: grep the sandbox's workspace (ripgrep when present, grep otherwise)."""

from __future__ import annotations

import shlex

from agentflow.errors import ToolError
from agentflow.tools import ToolResult, tool
from agentflow.tools.context import ToolContext


@tool(timeout=60)
async def search(
    pattern: str,
    ctx: ToolContext,
    path: str = ".",
    glob: str | None = None,
    ignore_case: bool = False,
    fixed_string: bool = False,
    max_matches: int = 100,
) -> ToolResult:
    """Search file contents for a regular expression; prints path:line:text for each match.

    Args:
        pattern: regular expression (ripgrep/ERE syntax), or plain text with fixed_string=true.
        path: file or directory to search, relative to the workspace.
        glob: only files whose name matches, e.g. "*.py".
        ignore_case: match case-insensitively.
        fixed_string: treat pattern as literal text.
        max_matches: stop listing after this many matches.
    """
    flags = (" -i" if ignore_case else "") + (" -F" if fixed_string else "")
    q = shlex.quote
    rg = (
        f"rg -n --no-heading --color never{flags}"
        + (f" -g {q(glob)}" if glob else "")
        + f" -e {q(pattern)} -- {q(path)}"
    )
    grep = (
        f"grep -rnIE --exclude-dir=.git{flags}"
        + (f" --include={q(glob)}" if glob else "")
        + f" -e {q(pattern)} -- {q(path)}"
    )
    cmd = f"if command -v rg >/dev/null; then {rg}; else {grep}; fi"
    res = await ctx.require_sandbox().exec(cmd, timeout=50)
    if res.exit_code not in (0, 1):
        raise ToolError(f"search failed: {(res.stderr or res.stdout).strip()[:300]}")
    lines = [line for line in res.stdout.splitlines() if line]
    matches = []
    for line in lines[:max_matches]:
        file, _, rest = line.partition(":")
        num, _, text = rest.partition(":")
        matches.append({"path": file, "line": int(num) if num.isdigit() else 0, "text": text})
    if not lines:
        return ToolResult(text=f"no matches for {pattern!r} in {path}", data={"total": 0, "matches": []})
    more = f"\n[{len(lines) - max_matches} more matches not shown]" if len(lines) > max_matches else ""
    return ToolResult(
        text="\n".join(lines[:max_matches]) + more, data={"total": len(lines), "matches": matches}
    )
