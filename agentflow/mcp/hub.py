"""`McpHub`: the MCP servers of one run (or one registry): each started on first use, shared, stopped together."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Self

from agentflow.errors import UserError
from agentflow.mcp.config import McpServerConfig, parse_server
from agentflow.mcp.connection import McpConnection
from agentflow.mcp.tool import McpTool

if TYPE_CHECKING:
    from agentflow.events import EventLog

ServerLike = str | Mapping[str, Any] | McpServerConfig


class McpHub:
    """Named connections to MCP servers and their tools, listed once per server."""

    def __init__(self, servers: Iterable[ServerLike] = (), *, events: EventLog | None = None) -> None:
        self.events = events
        self.configs: dict[str, McpServerConfig] = {}
        self._connections: dict[str, McpConnection] = {}
        self._tools: dict[str, list[McpTool]] = {}
        for server in servers:
            self.add(server)

    def add(self, server: ServerLike) -> McpServerConfig:
        """Declare a server (nothing starts until its tools are needed)."""
        cfg = parse_server(server)
        if cfg.name in self.configs:
            raise UserError(
                f"two MCP servers are named {cfg.name!r}", hint="give each a different name: in its config"
            )
        self.configs[cfg.name] = cfg
        return cfg

    def __bool__(self) -> bool:
        return bool(self.configs)

    def connection(self, name: str) -> McpConnection:
        if name not in self.configs:
            raise UserError(f"unknown MCP server {name!r}; declared: {', '.join(self.configs) or 'none'}")
        conn = self._connections.get(name)
        if conn is None:
            conn = self._connections[name] = McpConnection(self.configs[name], events=self.events)
        return conn

    async def tools(self, servers: Iterable[str] | None = None) -> list[McpTool]:
        """The tools of the named servers (default: all), starting each server on first use."""
        out: list[McpTool] = []
        for name in list(servers) if servers is not None else list(self.configs):
            if name not in self._tools:
                self._tools[name] = await self._list(name)
            out.extend(self._tools[name])
        return out

    async def find(self, tool_name: str) -> McpTool | None:
        """The MCP tool registered as `tool_name`, if any server offers it."""
        return next((t for t in await self.tools() if t.name == tool_name), None)

    async def _list(self, name: str) -> list[McpTool]:
        conn = self.connection(name)
        cfg = conn.config
        offered = await conn.list_tools()
        known = {t.name for t in offered}
        unknown = [n for n in [*(cfg.allow or []), *cfg.block] if n not in known]
        if unknown:
            raise UserError(
                f"MCP server '{name}' has no tool(s) {', '.join(unknown)} (named in allow/block)",
                hint=f"it offers: {', '.join(sorted(known)) or 'nothing'}",
            )
        chosen = [t for t in offered if (cfg.allow is None or t.name in cfg.allow) and t.name not in cfg.block]
        return [McpTool(conn, t) for t in chosen]

    async def aclose(self) -> None:
        """Stop every started server (each starts again on its next use)."""
        for conn in self._connections.values():
            await conn.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
