"""Item 8: the snapshot store cannot fill the host's disk from inside a sandbox.

The git object store that snapshots use was a Docker volume on the host's disk with no size limit (2 GiB
written in 14 s, when sandboxed commands could write it); it is now a tmpfs of `store_size_mb`, charged to the
container's memory cgroup like the workspace. Sandboxed commands can no longer write it at all (only the
agent's snapshot operations can, `tests/security/test_branch_scratch.py`), so the store is filled here as a
snapshot operation would fill it.
"""

from __future__ import annotations

import asyncio

import pytest

from agentflow.errors import SandboxError
from agentflow.sandbox import open_sandbox
from agentflow.sandbox.config import SandboxConfig
from agentflow.sandbox.docker import STORE_DIR, docker_client

pytestmark = pytest.mark.docker

FILL = f"dd if=/dev/zero of={STORE_DIR}/junk bs=1M count=1024 2>&1"
MIB = 1024 * 1024


async def test_filling_the_snapshot_store_stops_short_and_touches_no_host_disk(docker_image: str) -> None:
    cfg = SandboxConfig(image=docker_image)
    limit = SandboxConfig().model_dump().get("store_size_mb", 512)
    async with open_sandbox("docker", cfg) as sb:
        await sb.write_file("code.py", "print('v1')\n")
        first = await sb.snapshot()
        refused = await sb.exec(FILL, timeout=60)
        assert not refused.ok and "Permission denied" in refused.output, refused
        fill = await sb._exec(FILL, 60, store=True)
        written = int((await sb._exec(f"stat -c %s {STORE_DIR}/junk", store=True)).stdout)
        # stopped by a full store, well below the 1 GiB asked for
        assert not fill.ok and "No space left on device" in fill.output, fill
        assert fill.limit_hit == "disk", fill
        assert written <= limit * MIB < 1024 * MIB, written
        # every place the container can write is in memory: nothing of it lands on the host's disk
        mounts = (await asyncio.to_thread(docker_client().api.inspect_container, sb.id))["Mounts"]
        assert not [m for m in mounts if m.get("RW")], mounts

        # with the store full, a snapshot fails and says why and what to do
        await sb.write_file("code.py", "print('v2')\n")
        with pytest.raises(SandboxError, match="snapshot store .*is full.*store_size_mb"):
            await sb.snapshot()
        # once the space is freed, snapshot and restore work again
        await sb._exec(f"rm -f {STORE_DIR}/junk", store=True)
        second = await sb.snapshot()
        await sb.restore(first)
        assert await sb.read_file("code.py") == "print('v1')\n"
        await sb.restore(second)
        assert await sb.read_file("code.py") == "print('v2')\n"
