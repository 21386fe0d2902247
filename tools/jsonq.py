"""Pack `jsonq`: pick values out of a JSON document with a small jq-style path language.

Syntax: `.` (the whole document), `.key`, `."odd key"`, `.["odd key"]`, `[0]`, `[-1]`, `[1:3]`, `[]` (every
element or value), chained (`.items[].name`), and `|` into the built-ins `length`, `keys`, `values`,
`first`, `last`, `unique`, `sort`, `type`, or another path. A built-in after `[]` applies to all the values
selected (`.items[].name | unique` is jq's `[.items[].name] | unique`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentflow.errors import ToolError
from agentflow.tools import tool

_KEY = re.compile(r'\.(?:([A-Za-z_][\w-]*)|"((?:[^"\\]|\\.)*)")')
_INDEX = re.compile(r'\[\s*(?:(-?\d+)|(-?\d*)\s*:\s*(-?\d*)|"((?:[^"\\]|\\.)*)"|)\s*\]')
_BUILTINS = {"length", "keys", "values", "first", "last", "unique", "sort", "type"}


def query(document: Any, path: str) -> list[Any]:
    """Every value `path` selects from `document` (a path with `[]` can select many)."""
    stream, many = [document], False
    for stage in _split_pipes(path):
        # `.a[] | length` means the collected values, as jq's `[.a[]] | length`
        if stage in _BUILTINS and many:
            stream, many = [_builtin(stream, stage)], False
            continue
        many = many or "[]" in stage.replace(" ", "")
        stream = [out for value in stream for out in _apply_stage(value, stage)]
    return stream


def _split_pipes(path: str) -> list[str]:
    stages: list[str] = []
    current: list[str] = []
    depth, quoted = 0, False
    for i, ch in enumerate(path):
        if ch == '"' and (i == 0 or path[i - 1] != "\\"):
            quoted = not quoted
        elif not quoted and ch == "[":
            depth += 1
        elif not quoted and ch == "]":
            depth -= 1
        if ch == "|" and not quoted and depth == 0:
            stages.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    stages.append("".join(current).strip())
    if any(not s for s in stages):
        raise ToolError(f"empty stage in {path!r}; write e.g. '.items | length'")
    return stages


def _apply_stage(value: Any, stage: str) -> list[Any]:
    if stage in _BUILTINS:
        return [_builtin(value, stage)]
    if not stage.startswith((".", "[")):
        raise ToolError(
            f"cannot read {stage!r}: a path starts with '.' (e.g. .items[0].name) or is one of {sorted(_BUILTINS)}"
        )
    stream, pos = [value], 0
    if stage == ".":
        return stream
    while pos < len(stage):
        key = _KEY.match(stage, pos)
        if key:
            name = key.group(1) if key.group(1) is not None else json.loads(f'"{key.group(2)}"')
            stream = [_field(v, name) for v in stream]
            pos = key.end()
            continue
        if stage.startswith(".[", pos):
            pos += 1
        index = _INDEX.match(stage, pos)
        if index:
            stream = [out for v in stream for out in _index(v, index)]
            pos = index.end()
            continue
        raise ToolError(f"cannot read the path at {stage[pos:]!r} (in {stage!r})")
    return stream


def _field(value: Any, name: str) -> Any:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ToolError(f"cannot take key {name!r} of {_type(value)}")
    return value.get(name)


def _index(value: Any, match: re.Match[str]) -> list[Any]:
    single, lo, hi, quoted = match.groups()
    if quoted is not None:
        return [_field(value, json.loads(f'"{quoted}"'))]
    if value is None:
        return [None]
    if single is None and lo is None:  # []
        if isinstance(value, list):
            return list(value)
        if isinstance(value, dict):
            return list(value.values())
        raise ToolError(f"cannot iterate over {_type(value)}")
    if not isinstance(value, (list, str)):
        raise ToolError(f"cannot index {_type(value)} with a number")
    if single is not None:
        i = int(single)
        return [value[i] if -len(value) <= i < len(value) else None]
    return [value[int(lo) if lo else None : int(hi) if hi else None]]


def _builtin(value: Any, name: str) -> Any:
    if name == "type":
        return _type(value).split(" ")[-1]
    if name == "length":
        if value is None:
            return 0
        if isinstance(value, (list, dict, str)):
            return len(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return abs(value)
    if name == "keys" and isinstance(value, dict):
        return sorted(value)
    if name == "keys" and isinstance(value, list):
        return list(range(len(value)))
    if name == "values" and isinstance(value, dict):
        return list(value.values())
    if isinstance(value, list):
        if name == "first":
            return value[0] if value else None
        if name == "last":
            return value[-1] if value else None
        if name in ("sort", "unique"):
            try:
                items = sorted(
                    value, key=lambda v: json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v
                )
            except TypeError:
                items = sorted(value, key=lambda v: json.dumps(v, sort_keys=True))
            if name == "unique":
                out: list[Any] = []
                for item in items:
                    if not out or out[-1] != item:
                        out.append(item)
                return out
            return items
    raise ToolError(f"'{name}' does not apply to {_type(value)}")


def _type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "an array"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "a string" if isinstance(value, str) else type(value).__name__


@tool(timeout=10.0)
def json_query(document: str, path: str = ".") -> str:
    """Select values from a JSON document with a jq-style path and return them as JSON.

    Paths: `.key`, `."odd key"`, `[0]`, `[-1]`, `[1:3]`, `[]` (every element), chained like `.items[].name`,
    and `| length`, `| keys`, `| values`, `| first`, `| last`, `| sort`, `| unique`, `| type`.
    One result is returned as JSON; several (from `[]`) as one JSON value per line.

    Args:
        document: The JSON text to query.
        path: The path, e.g. ".results[0].id" or ".items[].name | unique".
    """
    try:
        data = json.loads(document)
    except json.JSONDecodeError as exc:
        raise ToolError(
            f"document is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    results = query(data, path.strip() or ".")
    return "\n".join(json.dumps(r, ensure_ascii=False) for r in results) if results else "(no results)"
