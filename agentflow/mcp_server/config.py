"""`McpServeConfig`: what `agentflow mcp serve` exposes, and how."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentflow.config import StrictConfig

SANDBOX_PACKS = ["shell", "editor", "search", "patch", "tests"]
"""The built-in packs served by default: each acts on the sandbox only."""

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class McpServeConfig(StrictConfig):
    """Settings of `agentflow mcp serve`."""

    workspace: str
    """Host directory copied into the sandbox's workspace (the host copy is never changed by the tools)."""
    sandbox: Literal["docker", "local"] = "docker"
    """Where the tools run: a hardened Docker sandbox (no network), or `local` (a temporary host folder, no
    isolation: only for machines without Docker)."""
    packs: list[str] = Field(default_factory=lambda: list(SANDBOX_PACKS))
    """Tool packs served; they act on the sandbox."""
    transport: Literal["stdio", "http"] = "stdio"
    """`stdio` (the client starts this command) or `http` (streamable HTTP on `host:port`)."""
    host: str = "127.0.0.1"
    """Address the HTTP transport binds (loopback only)."""
    port: int = Field(default=8765, ge=0, le=65535)
    """Port of the HTTP transport."""
    token_file: str | None = None
    """Where the HTTP bearer token is written (mode 0600); default `<runs>/mcp-token`."""
    runs: str = "runs"
    """Folder of the server's event log and of the runs that `repair` and `run_workflow` start."""
    workflows: list[str] = Field(default_factory=list)
    """Workflow files `run_workflow` may run besides the shipped ones (a workflow's code runs on the host)."""
    model: str | None = None
    """Model spec of `repair` and `run_workflow` (else their own defaults). The server's choice: a client
    cannot name another model (its requests carry the server's API keys and the served code)."""
    allowed_models: list[str] = Field(default_factory=list)
    """Further model specs a client may name in `repair` / `run_workflow` (`--allow-model`, repeatable)."""
    sandbox_timeout_s: float = Field(default=8 * 3600.0, gt=0)
    """Life of the sandbox (it is removed when it is reached; restart the server for a fresh copy)."""
    job_timeout_s: float = Field(default=3600.0, gt=0)
    """Longest a `repair` or `run_workflow` call may run before it is stopped."""
