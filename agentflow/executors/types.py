"""The executor's settings and error (no Ray here: imported on the default path)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentflow.config import StrictConfig
from agentflow.errors import AgentflowError

ExecutorKind = Literal["in-process", "ray"]


class RemoteTaskError(AgentflowError):
    """A remote call was lost for good: its worker or node died more often than the retries allow."""

    def __init__(self, message: str, *, attempts: int = 0) -> None:
        self.attempts = attempts
        super().__init__(message)


class ExecutorConfig(StrictConfig):
    """Where `bench` / `eval` tasks and search rollouts run (`--executor`, `--ray-address`)."""

    kind: ExecutorKind = "in-process"
    """in-process: asyncio workers in this process (the default); ray: each task is a Ray task on a worker node."""
    address: str | None = None
    """Ray cluster to join: None starts a local Ray for the command (stopped at its end); `auto` joins the
    cluster `ray start` runs on this machine; `HOST:PORT` joins the one whose head is there."""
    task_cpus: float = Field(default=1.0, gt=0)
    """Ray CPUs one task holds; a node with C CPUs runs C / task_cpus tasks at once (its worker count)."""
    task_memory_mb: int | None = Field(default=None, ge=1)
    """Ray memory one task reserves (scheduling only; None reserves nothing)."""
    task_resources: dict[str, float] = Field(default_factory=dict)
    """Custom Ray resources one task needs, e.g. {"sandbox": 1} with `ray start --resources='{"sandbox": 2}'`
    to place tasks only on nodes that declare them."""
    max_retries: int = Field(default=2, ge=0, le=20)
    """Times Ray runs a task again after its worker or node died (not after an error inside the task)."""
    local_cpus: int | None = Field(default=None, ge=1)
    """CPUs of the local Ray started when `address` is None (default: the machine's)."""
    local_object_store_mb: int = Field(default=256, ge=80)
    """Object store of the local Ray started when `address` is None (task repositories and results pass it)."""
