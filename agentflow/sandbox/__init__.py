"""Sandboxes: where agent-written code runs. `open_sandbox()` starts one (docker; `local` only when asked
for by name, since it is not a security boundary), `SandboxPool` keeps warm ones. Heavy imports (docker-py)
happen only when a backend is used."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal

from agentflow._lazy import lazy_getattr
from agentflow.config import validate_config
from agentflow.errors import ConfigError, UserError
from agentflow.sandbox.base import ExecResult, FileEntry, Sandbox, SandboxInfo, sh_command
from agentflow.sandbox.config import DEFAULT_IMAGE, SandboxConfig

if TYPE_CHECKING:
    from agentflow.sandbox.docker import DockerSandbox
    from agentflow.sandbox.image import ensure_image
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
    """`docker` and `auto` need a Docker engine that answers (a one-line UserError naming the fix when it
    does not): model-written code never falls back to running on the host. `local` must be asked for."""
    if backend == "local":
        return "local"
    if backend not in ("auto", "docker"):
        raise ConfigError(f"unknown sandbox backend {backend!r}: use docker, local or auto")
    from agentflow.sandbox.docker import docker_client

    try:
        docker_client()
    except UserError as exc:
        raise UserError(
            f"no sandbox: {exc.args[0].split(' (')[0]}",
            hint="start Docker, or pass '--sandbox local' to run model-written code on this machine "
            "(not a security boundary)",
        ) from None
    return "docker"


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


_LAZY = {
    "SandboxPool": "agentflow.sandbox.pool",
    "DockerSandbox": "agentflow.sandbox.docker",
    "LocalSandbox": "agentflow.sandbox.local",
    "ensure_image": "agentflow.sandbox.image",
}
__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = [
    "DEFAULT_IMAGE", "DockerSandbox", "ExecResult", "FileEntry", "LocalSandbox", "Sandbox", "SandboxConfig",
    "SandboxInfo", "SandboxPool", "ensure_image", "open_sandbox", "sh_command", "start_sandbox"
]
