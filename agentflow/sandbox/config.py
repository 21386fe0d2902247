"""`SandboxConfig`: the hardened defaults of a sandbox and every knob to relax them explicitly."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from agentflow import __version__
from agentflow.config import StrictConfig

DEFAULT_IMAGE = f"agentflow-sandbox:{__version__}"


class SandboxConfig(StrictConfig):
    """Settings of one sandbox. Defaults are the hardened ones; each can be relaxed explicitly."""

    image: str = DEFAULT_IMAGE
    """Docker image to run (built by `agentflow sandbox build`)."""
    network: bool = False
    """Give the container a network (default: none at all)."""
    memory_mb: int = Field(default=1024, ge=32)
    """Memory limit of the whole container in MiB (swap is not allowed on top of it)."""
    cpus: float = Field(default=1.0, gt=0, le=64)
    """CPU share of the container (1.0 = one core)."""
    pids_limit: int = Field(default=256, ge=16)
    """Maximum number of processes and threads in the container (stops fork bombs)."""
    read_only_root: bool = True
    """Mount the image's root filesystem read-only; only the workspace and /tmp are writable."""
    workdir: str = "/workspace"
    """Absolute path of the workspace inside the sandbox (docker backend)."""
    workspace_size_mb: int = Field(default=1024, ge=16)
    """Size of the in-memory workspace filesystem in MiB (stops disk fills)."""
    tmp_size_mb: int = Field(default=256, ge=8)
    """Size of the tmpfs mounted on /tmp in MiB."""
    store_size_mb: int = Field(default=512, ge=16)
    """Size of the in-memory store of this sandbox's snapshot objects in MiB (docker backend; stops a
    sandboxed process from filling the disk through it)."""
    command_timeout_s: float = Field(default=120.0, gt=0)
    """Default wall-clock limit of one command; the whole process group is killed when it is reached."""
    sandbox_timeout_s: float = Field(default=3600.0, gt=0)
    """Wall-clock limit of the sandbox's whole life; it is killed when it is reached."""
    output_limit_bytes: int = Field(default=64_000, ge=1_000)
    """Captured output per stream; beyond it the head and tail are kept and the middle is counted."""
    output_kill_bytes: int = Field(default=256_000_000, ge=1_000)
    """A command that writes more than this is killed (limit_hit='output')."""
    user: str = "1000:1000"
    """User (uid:gid) commands run as inside the container; root ('0') must be asked for explicitly."""
    cap_drop: list[str] = Field(default_factory=lambda: ["ALL"])
    """Linux capabilities removed from the container."""
    cap_add: list[str] = Field(default_factory=list)
    """Linux capabilities given back (only when you know you need one)."""
    no_new_privileges: bool = True
    """Forbid privilege gain through setuid binaries."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables set for every command."""

    @field_validator("workdir")
    @classmethod
    def _absolute_workdir(cls, value: str) -> str:
        if not value.startswith("/") or value.rstrip("/") in ("", "/tmp", "/run/agentflow"):
            raise ValueError("must be an absolute path other than /, /tmp or /run/agentflow, e.g. /workspace")
        return value.rstrip("/")

    @field_validator("cap_drop", "cap_add")
    @classmethod
    def _cap_names(cls, value: list[str]) -> list[str]:
        out = []
        for cap in value:
            name = cap.upper().removeprefix("CAP_")
            if not name.replace("_", "").isalnum():
                raise ValueError(f"{cap!r} is not a capability name (e.g. ALL, NET_RAW)")
            out.append(name)
        return out

    @model_validator(mode="after")
    def _consistent(self) -> SandboxConfig:
        if self.command_timeout_s > self.sandbox_timeout_s:
            raise ValueError(
                f"command_timeout_s ({self.command_timeout_s}) exceeds sandbox_timeout_s ({self.sandbox_timeout_s})"
            )
        if self.output_kill_bytes < self.output_limit_bytes:
            raise ValueError("output_kill_bytes must be at least output_limit_bytes")
        return self

    def effective(self) -> dict[str, object]:
        """The settings as recorded in a run (`SandboxInfo.settings`)."""
        return self.model_dump(mode="json")
