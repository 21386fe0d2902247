"""plan_code_search_small's own steps: the files the plan names, read from the sandbox into the state, so the
small coder sees the code it is to change instead of guessing it; and the coder's rewritten function put in
place of the function of that name, so the edit needs no tool call (docs/measurements/small-model.md: a 1.5B
coder invented `str_replace` arguments, then answered "done" without calling the tool at all)."""

from __future__ import annotations

import ast
from typing import Any

from agentflow.errors import AgentflowError
from agentflow.models.ask import code_blocks
from agentflow.repair.edit.steps import read_rewrite
from agentflow.repair.locate.localize import Window

FILE_CHARS = 4000
"""Most characters of one file put into the coder's prompt (a longer file is cut, and the coder views it)."""

MAX_FILES = 2
"""Most files read (the first the plan names that exist)."""


async def plan_files(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """`files`: each file the plan's steps name that the sandbox holds, its path then its text fenced; `paths`:
    those files."""
    named: list[str] = []
    for step in (state.get("plan") or {}).get("steps") or []:
        for path in step.get("files") or []:
            if isinstance(path, str) and path not in named:
                named.append(path)
    shown: dict[str, str] = {}
    for path in named:
        try:
            shown[path] = await ctx.run.sandbox.read_file(path)
        except AgentflowError:  # a file the plan invented (a test it means to add): not shown, not rewritten
            continue
        if len(shown) == MAX_FILES:
            break
    files = [f"{path}:\n```\n{text[:FILE_CHARS].rstrip()}\n```" for path, text in shown.items()]
    return {"files": "\n\n".join(files), "paths": list(shown)}


def _defined(block: str) -> list[str]:
    """The names of the functions an answer's code block defines (none when it does not parse)."""
    try:
        tree = ast.parse(block)
    except SyntaxError:
        return []
    return [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _function_window(path: str, source: str, name: str) -> Window | None:
    """The lines of the function `name` in `source` (decorators included), the first one if several."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            return Window(path, start, node.end_lineno or node.lineno, score=1.0, symbol=name)
    return None


async def rewrite_function(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """`edit`: the coder's answer (`code.text`, the corrected function in a code block) put in place of each
    function of the same name in the shown files that it changes, through the repair's own rewrite reader
    (re-indents, keeps decorators and docstring). A small model often gives back the whole file with one
    function fixed: the functions it gave back unchanged are left alone. "noop" / "unparsable" otherwise."""
    answer = str((state.get("code") or {}).get("text") or "")
    names = list(dict.fromkeys(name for block in code_blocks(answer) for name in _defined(block)))
    if not names:
        return {"edit": "unparsable: no function in a ```python block"}
    changed: list[str] = []
    for path in state.get("paths") or []:
        source = original = await ctx.run.sandbox.read_file(path)
        for name in names:
            window = _function_window(path, source, name)
            read = read_rewrite(answer, {path: source}, window) if window is not None else None
            if read is not None and read.status == "ok":
                source = read.files.get(path, source)
                changed.append(f"{name} in {path}")
        if source != original:
            await ctx.run.sandbox.write_file(path, source)
    if not changed:
        return {"edit": f"noop: the answer changes no function of the shown files ({', '.join(names)})"}
    return {"edit": f"ok: {', '.join(changed)}"}
