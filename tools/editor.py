"""Pack `editor`: view, create and edit files in the sandbox, with undo (history kept in ToolContext.state)."""

from __future__ import annotations

from agentflow.errors import SandboxError, ToolError
from agentflow.tools import ToolResult, tool
from agentflow.tools.context import ToolContext

_SNIPPET = 4  # lines of context shown around an edit


def _history(ctx: ToolContext) -> dict[str, list[str | None]]:
    return ctx.state.setdefault("editor", {})


async def _read(ctx: ToolContext, path: str) -> str:
    try:
        return await ctx.require_sandbox().read_file(path)
    except SandboxError as exc:
        raise ToolError(str(exc)) from None


async def _exists(ctx: ToolContext, path: str) -> bool:
    try:
        await ctx.require_sandbox().read_file(path)
        return True
    except SandboxError:
        return False


def _numbered(text: str, start: int = 1) -> str:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return "\n".join(f"{i:6d}\t{line}" for i, line in enumerate(lines, start))


async def _save(ctx: ToolContext, path: str, new: str, old: str | None) -> None:
    await ctx.require_sandbox().write_file(path, new)
    _history(ctx).setdefault(path, []).append(old)


@tool(timeout=60)
async def view(
    path: str, ctx: ToolContext, start_line: int | None = None, end_line: int | None = None
) -> ToolResult:
    """Show a file with line numbers (optionally only lines start_line..end_line), or list a directory.

    Args:
        path: file or directory, relative to the workspace.
        start_line: first line to show (1-based).
        end_line: last line to show (inclusive; -1 for the end of the file).
    """
    sb = ctx.require_sandbox()
    try:
        entries = await sb.list_files(path, recursive=False)
    except SandboxError:
        entries = None
    if entries is not None:
        listing = "\n".join(e.path + ("/" if e.is_dir else "") for e in entries) or "(empty directory)"
        return ToolResult(text=listing, data={"path": path, "entries": [e.path for e in entries]})
    text = await _read(ctx, path)
    lines = text.split("\n")
    total = len(lines) - (1 if lines and lines[-1] == "" else 0)
    first = start_line or 1
    last = total if end_line in (None, -1) else end_line
    if first < 1 or first > max(total, 1) or last < first:
        raise ToolError(f"line range [{start_line}, {end_line}] is outside {path}, which has {total} lines")
    shown = "\n".join(lines[first - 1 : last])
    return ToolResult(
        text=_numbered(shown, first),
        data={"path": path, "start_line": first, "end_line": min(last, total), "total_lines": total},
    )


@tool(timeout=60)
async def create(path: str, content: str, ctx: ToolContext) -> ToolResult:
    """Create a file with the given content (fails if it exists; use str_replace to edit).

    Args:
        path: new file, relative to the workspace; parent directories are created.
        content: the full text of the file.
    """
    if await _exists(ctx, path):
        raise ToolError(f"{path} already exists; edit it with str_replace or insert")
    await _save(ctx, path, content, None)
    return ToolResult(text=f"created {path} ({len(content.splitlines())} lines)", data={"path": path})


@tool(timeout=60)
async def str_replace(path: str, old_str: str, new_str: str, ctx: ToolContext) -> ToolResult:
    """Replace the one occurrence of old_str in a file with new_str (old_str must match exactly once).

    Args:
        path: file to edit, relative to the workspace.
        old_str: exact text to replace, including whitespace; add surrounding lines to make it unique.
        new_str: replacement text.
    """
    text = await _read(ctx, path)
    count = text.count(old_str) if old_str else 0
    if count == 0:
        raise ToolError(f"old_str was not found in {path}; view the file and copy the text exactly")
    if count > 1:
        lines = [i + 1 for i, line in enumerate(text.split("\n")) if old_str.split("\n")[0] in line]
        raise ToolError(f"old_str occurs {count} times in {path} (lines {lines[:10]}); include more context")
    at = text.index(old_str)
    new = text[:at] + new_str + text[at + len(old_str) :]
    await _save(ctx, path, new, text)
    line = text[:at].count("\n") + 1
    lines = new.split("\n")
    lo = max(line - _SNIPPET, 1)
    hi = min(line + new_str.count("\n") + _SNIPPET, len(lines))
    snippet = _numbered("\n".join(lines[lo - 1 : hi]), lo)
    return ToolResult(
        text=f"edited {path}; lines {lo}-{hi} now read:\n{snippet}", data={"path": path, "line": line}
    )


@tool(timeout=60)
async def insert(path: str, line: int, text: str, ctx: ToolContext) -> ToolResult:
    """Insert text after the given line of a file (0 inserts at the top).

    Args:
        path: file to edit, relative to the workspace.
        line: insert after this line number (0 = before the first line).
        text: the lines to insert.
    """
    old = await _read(ctx, path)
    lines = old.split("\n")
    total = len(lines) - (1 if lines and lines[-1] == "" else 0)
    if line < 0 or line > total:
        raise ToolError(f"line {line} is outside {path}, which has {total} lines (use 0..{total})")
    added = text.rstrip("\n").split("\n")
    new_lines = lines[:line] + added + lines[line:]
    await _save(ctx, path, "\n".join(new_lines), old)
    lo = max(line + 1 - _SNIPPET, 1)
    hi = min(line + len(added) + _SNIPPET, len(new_lines))
    snippet = _numbered("\n".join(new_lines[lo - 1 : hi]), lo)
    return ToolResult(
        text=f"inserted {len(added)} lines into {path}:\n{snippet}", data={"path": path, "line": line}
    )


@tool(timeout=60)
async def undo_edit(path: str, ctx: ToolContext) -> ToolResult:
    """Undo the last create/str_replace/insert made with these tools on a file.

    Args:
        path: the file whose last edit to undo.
    """
    stack = _history(ctx).get(path)
    if not stack:
        raise ToolError(f"no edit of {path} to undo")
    previous = stack.pop()
    sb = ctx.require_sandbox()
    if previous is None:
        res = await sb.exec(f"rm -f -- {_quote(path)}")
        if not res.ok:
            raise ToolError(f"could not remove {path}: {res.output.strip()}")
        return ToolResult(text=f"undid the creation of {path} (file removed)", data={"path": path})
    await sb.write_file(path, previous)
    return ToolResult(text=f"restored {path} to its content before the last edit", data={"path": path})


def _quote(path: str) -> str:
    import shlex

    return shlex.quote(path)
