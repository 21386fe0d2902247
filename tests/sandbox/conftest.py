"""Shared fixtures: the offline image (built once if missing) and warm pools reused by every test."""

from __future__ import annotations

import pytest
import pytest_asyncio

from agentflow.sandbox.config import SandboxConfig


def _docker_or_skip() -> None:
    from agentflow.errors import UserError
    from agentflow.sandbox.docker import docker_client

    try:
        docker_client()
    except UserError as exc:
        pytest.skip(f"Docker is not available: {exc}")


@pytest.fixture(scope="session")
def sandbox_image() -> str:
    _docker_or_skip()
    from agentflow.sandbox.image import ensure_image

    return ensure_image()


HOSTILE = SandboxConfig(
    memory_mb=256,
    pids_limit=128,
    workspace_size_mb=64,
    tmp_size_mb=32,
    command_timeout_s=20,
    output_limit_bytes=4000,
    output_kill_bytes=50_000_000,
)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def pool(sandbox_image: str):
    from agentflow.sandbox import SandboxPool

    async with SandboxPool(3, SandboxConfig(image=sandbox_image), backend="docker") as p:
        yield p


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def hostile_pool(sandbox_image: str):
    from agentflow.sandbox import SandboxPool

    async with SandboxPool(2, HOSTILE.model_copy(update={"image": sandbox_image}), backend="docker") as p:
        yield p


@pytest_asyncio.fixture(loop_scope="session")
async def sb(pool):
    box = await pool.acquire()
    yield box
    await pool.release(box)
