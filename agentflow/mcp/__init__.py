"""Tools from MCP servers: `McpServerConfig` (how to reach one), `McpHub` (a run's servers, started on first
use, restarted after a crash or hang, stopped together) and `McpTool` (one server tool as an agentflow
`Tool`). Needs the optional `agentflow[mcp]` extra; only `McpServerConfig` loads without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentflow._lazy import lazy_getattr

_LAZY: dict[str, str] = {
    "McpServerConfig": "agentflow.mcp.config",
    "parse_server": "agentflow.mcp.config",
    "McpConnection": "agentflow.mcp.connection",
    "McpServerDied": "agentflow.mcp.connection",
    "McpHub": "agentflow.mcp.hub",
    "McpTool": "agentflow.mcp.tool",
}

if TYPE_CHECKING:  # pragma: no cover
    from agentflow.mcp.config import McpServerConfig, parse_server
    from agentflow.mcp.connection import McpConnection, McpServerDied
    from agentflow.mcp.hub import McpHub
    from agentflow.mcp.tool import McpTool

__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = ["McpConnection", "McpHub", "McpServerConfig", "McpServerDied", "McpTool", "parse_server"]
