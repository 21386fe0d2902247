"""Typed tools for agents: `@tool`, `ToolRegistry`, results, the call journal and tool packs.

Names resolve lazily so that `import agentflow.tools` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentflow._lazy import lazy_getattr

_LAZY: dict[str, str] = {
    "tool": "agentflow.tools.decorator",
    "Tool": "agentflow.tools.decorator",
    "ToolRegistry": "agentflow.tools.registry",
    "ToolResult": "agentflow.tools.result",
    "ToolJournal": "agentflow.tools.journal",
    "SqliteToolJournal": "agentflow.tools.journal",
    "journal_key": "agentflow.tools.journal",
    "load_pack": "agentflow.tools.packs",
    "available_packs": "agentflow.tools.packs",
    "ToolContext": "agentflow.tools.context",
}

if TYPE_CHECKING:  # pragma: no cover
    from agentflow.tools.context import ToolContext
    from agentflow.tools.decorator import Tool, tool
    from agentflow.tools.journal import SqliteToolJournal, ToolJournal, journal_key
    from agentflow.tools.packs import available_packs, load_pack
    from agentflow.tools.registry import ToolRegistry
    from agentflow.tools.result import ToolResult


__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = [
    "SqliteToolJournal", "Tool", "ToolContext", "ToolJournal", "ToolRegistry", "ToolResult",
    "available_packs", "journal_key", "load_pack", "tool"
]
