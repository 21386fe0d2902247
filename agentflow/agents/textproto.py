"""Tool calls for models without native tool calling: fenced ```tool blocks in the reply text.

A block holds one JSON object `{"name": ..., "arguments": {...}}`. A block that is not valid JSON still
becomes a `ToolCall` (with `arguments_error` set) so the model is told what was wrong.
"""

from __future__ import annotations

import json
import re

from agentflow.models.base import ToolCall

_BLOCK = re.compile(r"```tool[ \t]*\n(.*?)```", re.DOTALL)


def parse_tool_blocks(text: str | None, *, id_prefix: str = "call") -> list[ToolCall]:
    """The tool calls written in `text`, in order."""
    calls: list[ToolCall] = []
    for i, match in enumerate(_BLOCK.finditer(text or "")):
        call_id = f"{id_prefix}-{i}"
        raw = match.group(1).strip()
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            calls.append(ToolCall(id=call_id, name="", arguments_error=f"the tool block is not valid JSON: {exc}"))
            continue
        name = obj.get("name") if isinstance(obj, dict) else None
        args = obj.get("arguments", {}) if isinstance(obj, dict) else None
        if not isinstance(name, str) or not name:
            calls.append(ToolCall(id=call_id, name="", arguments_error='the tool block needs a "name" string'))
        elif not isinstance(args, dict):
            calls.append(ToolCall(id=call_id, name=name, arguments_error='"arguments" must be a JSON object'))
        else:
            calls.append(ToolCall(id=call_id, name=name, arguments=args))
    return calls
