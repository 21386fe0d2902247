"""`ToolResult`: what a tool call gives back, and how a tool's return value becomes one."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

DEFAULT_MAX_CHARS = 10_000
"""Longest `text` a model sees from one tool call; the full output stays in `data["full_text"]`."""


class ToolResult(BaseModel):
    """The outcome of one tool call. `text` is what the model reads; `data` keeps structured fields."""

    ok: bool = True
    """False when the tool failed, timed out or was called with invalid arguments."""
    text: str = ""
    """Model-facing text (capped: head and tail kept, the cut said in the middle)."""
    data: dict[str, Any] = Field(default_factory=dict)
    """Structured result fields; `full_text` holds the uncut text when `text` was capped."""
    error: str | None = None
    """Short reason when `ok` is False (for reports and events, not for the model)."""
    duration_s: float = 0.0
    """Wall time of the call (0 for a replayed call)."""
    replayed: bool = False
    """True when the result came from the tool journal instead of running the tool."""

    @classmethod
    def failure(cls, message: str, *, error: str | None = None, **data: Any) -> ToolResult:
        """A failed call; the model reads `ToolError: <message>`."""
        return cls(ok=False, text=f"ToolError: {message}", error=error or message, data=data)


def cap_text(text: str, max_chars: int | None) -> tuple[str, int]:
    """Keep the head and tail of `text` within about `max_chars`; returns (text, characters cut)."""
    if max_chars is None or len(text) <= max_chars:
        return text, 0
    keep = max(max_chars, 2)
    head = text[: keep * 2 // 3]
    tail = text[len(text) - (keep - len(head)) :]
    cut = len(text) - len(head) - len(tail)
    marker = (
        f"\n[... {cut} of {len(text)} characters cut; the tool's full output is kept in the run's data ...]\n"
    )
    return head + marker + tail, cut


def to_result(value: Any, *, max_chars: int | None = DEFAULT_MAX_CHARS) -> ToolResult:
    """Turn whatever a tool returned (str, dict, list, pydantic model, ToolResult, scalar, None) into a result."""
    if isinstance(value, ToolResult):
        result = value.model_copy(deep=True)
    elif isinstance(value, str):
        result = ToolResult(text=value)
    elif value is None:
        result = ToolResult(text="(no output)")
    elif isinstance(value, BaseModel):
        data = value.model_dump(mode="json")
        result = ToolResult(text=_compact_json(data), data=data)
    elif isinstance(value, dict):
        data = json.loads(_compact_json(value))
        result = ToolResult(text=_compact_json(data), data=data)
    else:
        plain = json.loads(_compact_json(value))
        result = ToolResult(
            text=plain if isinstance(plain, str) else _compact_json(plain), data={"result": plain}
        )
    capped, cut = cap_text(result.text, max_chars)
    if cut:
        result.data = {**result.data, "full_text": result.text, "cut_chars": cut}
        result.text = capped
    return result


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_default)


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)
