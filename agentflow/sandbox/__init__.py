"""Sandboxes: where agent-written code runs. `open_sandbox()` starts one (docker when available, else
local), `SandboxPool` keeps warm ones. Heavy imports (docker-py) happen only when a backend is used."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal

from agentflow.config import validate_config
from agentflow.errors import ConfigError, UserError
from agentflow.sandbox.base import ExecResult, FileEntry, Sandbox, SandboxInfo
from agentflow.sandbox.config import DEFAULT_IMAGE, SandboxConfig

if TYPE_CHECKING:
    from agentflow.sandbox.docker import DockerSandbox
    from agentflow.sandbox.local import LocalSandbox
    from agentflow.sandbox.pool import SandboxPool
    from agentflow.sandbox.session import AgentSandbox

Backend = Literal["auto", "docker", "local"]


def resolve_config(config: SandboxConfig | dict[str, Any] | None) -> SandboxConfig:
    if config is None:
        return SandboxConfig()
    if isinstance(config, SandboxConfig):
        return config
    return validate_config(SandboxConfig, config, source="sandbox config")


def resolve_backend(backend: str) -> Literal["docker", "local"]:
    """`auto` picks docker when the engine answers, local otherwise."""
    if backend == "local":
        return "local"
    if backend not in ("auto", "docker"):
        raise ConfigError(f"unknown sandbox backend {backend!r}: use docker, local or auto")
    from agentflow.sandbox.docker import docker_available, docker_client

    if backend == "docker":
        docker_client()  # raises a one-line UserError when Docker is not there
        return "docker"
    try:
        return "docker" if docker_available() else "local"
    except UserError:  # docker-py not installed
        return "local"


async def start_sandbox(
    backend: Backend = "auto", config: SandboxConfig | dict[str, Any] | None = None, *, events: Any = None
) -> AgentSandbox:
    """Start a sandbox; the caller closes it (`await sb.close()`). With `events` (an EventLog) its effective
    settings are recorded as `sandbox.start` and each command as `sandbox.exec`."""
    cfg = resolve_config(config)
    sb: AgentSandbox
    if resolve_backend(backend) == "docker":
        from agentflow.sandbox.docker import DockerSandbox

        sb = await DockerSandbox.start(cfg)
    else:
        from agentflow.sandbox.local import LocalSandbox

        sb = await LocalSandbox.start(cfg)
    sb.attach_events(events)
    return sb


@contextlib.asynccontextmanager
async def open_sandbox(
    backend: Backend = "auto", config: SandboxConfig | dict[str, Any] | None = None, *, events: Any = None
) -> AsyncIterator[AgentSandbox]:
    """`async with open_sandbox("docker") as sb: await sb.exec("pytest -q")` — removed on exit."""
    sb = await start_sandbox(backend, config, events=events)
    try:
        yield sb
    finally:
        await sb.close()


def __getattr__(name: str) -> Any:
    if name == "SandboxPool":
        from agentflow.sandbox.pool import SandboxPool

        return SandboxPool
    if name == "DockerSandbox":
        from agentflow.sandbox.docker import DockerSandbox

        return DockerSandbox
    if name == "LocalSandbox":
        from agentflow.sandbox.local import LocalSandbox

        return LocalSandbox
    if name == "ensure_image":
        from agentflow.sandbox.image import ensure_image

        return ensure_image
    raise AttributeError(f"module 'agentflow.sandbox' has no attribute {name!r}")


__all__ = [
    "DEFAULT_IMAGE",
    "DockerSandbox",
    "ExecResult",
    "FileEntry",
    "LocalSandbox",
    "Sandbox",
    "SandboxConfig",
    "SandboxInfo",
    "SandboxPool",
    "ensure_image",
    "open_sandbox",
    "start_sandbox",
]
