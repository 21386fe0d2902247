"""plan_code_search_small's own step: the files the plan names, read from the sandbox into the state, so the
small coder sees the code it is to change instead of guessing it (docs/measurements/small-model.md: a 1.5B
coder wrote `str_replace` with an invented `old_str` before viewing the file)."""

from __future__ import annotations

from typing import Any

from agentflow.errors import AgentflowError

FILE_CHARS = 4000
"""Most characters of one file put into the coder's prompt (a longer file is cut, and the coder views it)."""

MAX_FILES = 2
"""Most files read (the first the plan names)."""


async def plan_files(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """`files`: each file the plan's steps name (that the sandbox holds): its path, then its text fenced."""
    named: list[str] = []
    for step in (state.get("plan") or {}).get("steps") or []:
        for path in step.get("files") or []:
            if isinstance(path, str) and path not in named:
                named.append(path)
    shown = []
    for path in named[:MAX_FILES]:
        try:
            text = await ctx.run.sandbox.read_file(path)
        except AgentflowError:  # a file the plan invented: the coder finds the right one with `view`
            text = None
        if text is not None:
            shown.append(f"{path}:\n```\n{text[:FILE_CHARS].rstrip()}\n```")
    return {"files": "\n\n".join(shown)}
