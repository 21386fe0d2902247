"""`agentflow mcp serve`: agentflow's sandboxed tool packs, `repair` and `run_workflow` as an MCP server
(stdio, or streamable HTTP on 127.0.0.1 behind a bearer token). Needs the `agentflow[mcp]` extra."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentflow._lazy import lazy_getattr

_LAZY: dict[str, str] = {
    "McpServeConfig": "agentflow.mcp_server.config",
    "serve": "agentflow.mcp_server.server",
    "build_server": "agentflow.mcp_server.server",
    "open_workspace": "agentflow.mcp_server.server",
}

if TYPE_CHECKING:  # pragma: no cover
    from agentflow.mcp_server.config import McpServeConfig
    from agentflow.mcp_server.server import build_server, open_workspace, serve

__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = ["McpServeConfig", "build_server", "open_workspace", "serve"]
