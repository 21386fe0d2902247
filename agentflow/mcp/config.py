"""`McpServerConfig`: how to reach one MCP server whose tools join a `ToolRegistry`.

Pure configuration (pydantic only): importing it never imports the `mcp` SDK, so workflow specs can carry
`mcp_servers:` on the default path.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator, model_validator

from agentflow.config import StrictConfig, validate_config
from agentflow.errors import UserError

_SERVER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,40}$")


class McpServerConfig(StrictConfig):
    """One MCP server: a command started over stdio, or a streamable-HTTP URL (exactly one of them)."""

    name: str = ""
    """Short name used in events and errors (default: the command's program or the URL's host)."""
    command: str | list[str] | None = None
    """Command line that starts a stdio server, e.g. `python my_server.py` (a string is split like a shell)."""
    url: str | None = None
    """Streamable-HTTP endpoint, e.g. `http://127.0.0.1:8000/mcp`."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables set for a stdio server (on top of a minimal PATH/HOME/...; nothing else leaks)."""
    pass_env: list[str] = Field(default_factory=list)
    """Names of host environment variables handed to a stdio server (how a secret reaches it: never in YAML)."""
    cwd: str | None = None
    """Working directory of a stdio server (default: the current one); in a workflow file, relative to its folder."""
    bearer_token_env: str | None = None
    """Name of a host environment variable holding a bearer token sent to an HTTP server."""
    allow: list[str] | None = None
    """Only these tools of the server (its own names); None for all."""
    block: list[str] = Field(default_factory=list)
    """Tools of the server never offered (its own names)."""
    prefix: str = ""
    """Prepended to every tool name (e.g. `gh_`), to keep names of several servers apart."""
    start_timeout_s: float = Field(default=30.0, gt=0)
    """Seconds the server may take to start and answer the handshake and the tool listing."""
    call_timeout_s: float = Field(default=60.0, gt=0)
    """Seconds one tool call may take; a server that does not answer in time is restarted for the next call."""
    max_result_chars: int = Field(default=10_000, ge=100)
    """Longest text a model sees from one call (head and tail kept)."""
    max_result_bytes: int = Field(default=1_000_000, ge=1_000)
    """Most bytes of a result kept at all (text and structured content); the rest is dropped unread."""

    @field_validator("command", mode="before")
    @classmethod
    def _split_command(cls, value: Any) -> Any:
        if isinstance(value, str):
            parts = shlex.split(value)
            if not parts:
                raise ValueError("command is empty")
            return parts
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command (a stdio server) or url (a streamable-HTTP server)")
        if self.url is not None and not re.match(r"^https?://", self.url):
            raise ValueError(f"url {self.url!r} must start with http:// or https://")
        if not self.name:
            object.__setattr__(self, "name", _default_name(self))
        if not _SERVER_NAME.match(self.name):
            raise ValueError(f"name {self.name!r} must be 1-40 letters, digits, '_' or '-'")
        return self

    @property
    def argv(self) -> list[str]:
        return list(self.command or [])

    def describe(self) -> str:
        """The command line or URL, for error messages."""
        return shlex.join(self.argv) if self.command is not None else str(self.url)


_LAUNCHER = re.compile(r"^(python[0-9.]*|node|npx|uvx|uv|deno|bun|pipx|docker|run)$")


def _default_name(cfg: McpServerConfig) -> str:
    """The server's program: the first word that is neither a launcher (python, npx, uvx, ...) nor a flag."""
    if cfg.command:
        words = [w.rstrip("/").rsplit("/", 1)[-1] for w in cfg.argv if not w.startswith("-")]
        base = next((w for w in words if not _LAUNCHER.match(w)), words[0] if words else "mcp")
        base = base.removesuffix(".py").removesuffix(".js")
    else:
        base = re.sub(r"^https?://", "", str(cfg.url)).split("/", 1)[0]
    return re.sub(r"[^a-zA-Z0-9_-]", "_", base)[:40] or "mcp"


def parse_server(value: str | Mapping[str, Any] | McpServerConfig) -> McpServerConfig:
    """A config from a command line or URL string (the CLI's `--mcp`), a mapping (YAML) or a config."""
    if isinstance(value, McpServerConfig):
        return value
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise UserError("--mcp needs a command line or an http(s):// URL")
        data: dict[str, Any] = {"url": text} if re.match(r"^https?://", text) else {"command": text}
        return validate_config(McpServerConfig, data, source="--mcp")
    return validate_config(McpServerConfig, dict(value), source="mcp_servers")
