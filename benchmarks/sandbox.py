"""Sandbox speed figures, all from one run; prints ONE JSON object.

cold start (a new hardened container with its agent answering) vs warm-pool acquire; exec round trip through
agentflow vs docker-py `exec_run` vs the `docker exec` CLI on the same container; the same command as a search
branch runs it (its processes ended and its workspace snapshotted after it); snapshot+restore of a
~10 MB repository across two pooled sandboxes; 8 sandboxes started, used and removed in parallel.
Run: .venv/bin/python benchmarks/sandbox.py   (builds the offline image first if it is missing)
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import time


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]


def ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


MAKE_REPO = r"""
python3 - <<'PY'
import os, random
random.seed(7)
words = [''.join(random.choice('abcdefghij') for _ in range(6)) for _ in range(500)]
for d in range(20):
    os.makedirs(f'pkg{d}', exist_ok=True)
    for f in range(20):
        with open(f'pkg{d}/mod{f}.py', 'w') as fh:
            fh.write('\n'.join(' '.join(random.choices(words, k=12)) for _ in range(300)) + '\n')
PY
du -sm . | cut -f1
"""


async def main() -> dict[str, object]:
    from agentflow.sandbox import SandboxPool
    from agentflow.sandbox.config import SandboxConfig
    from agentflow.sandbox.docker import DockerSandbox, docker_client
    from agentflow.sandbox.image import ensure_image

    config = SandboxConfig(image=ensure_image())
    client = docker_client()

    cold = []
    for _ in range(5):
        t0 = time.perf_counter()
        sb = await DockerSandbox.start(config)
        cold.append(ms(t0))
        await sb.close()

    async with SandboxPool(2, config, backend="docker") as pool:
        acquire = []
        for _ in range(20):
            while pool.ready < 2:
                await asyncio.sleep(0.01)
            t0 = time.perf_counter()
            sb = await pool.acquire()
            acquire.append(ms(t0))
            await pool.release(sb)

        sb = await pool.acquire()
        for _ in range(10):
            await sb.exec("true")
        # Interleaved rounds, so that load from other processes weighs on the three paths alike.
        ours: list[float] = []
        dpy: list[float] = []
        cli: list[float] = []
        container = client.containers.get(sb.id)
        for _ in range(20):
            for _ in range(10):
                t0 = time.perf_counter()
                await sb.exec("true")
                ours.append(ms(t0))
            for _ in range(2):
                t0 = time.perf_counter()
                container.exec_run(["true"])
                dpy.append(ms(t0))
            t0 = time.perf_counter()
            subprocess.run(["docker", "exec", sb.id, "true"], check=True)
            cli.append(ms(t0))

        # A search branch's command: the same `true` through a BranchSandbox, which ends the branch's processes
        # and snapshots the workspace after each command (graph/search/workspace.py).
        from agentflow.graph.search.workspace import BranchSandbox, SharedSandbox

        shared = SharedSandbox(sb)
        branch = BranchSandbox(shared, await shared.snapshot())
        branch_exec: list[float] = []
        for _ in range(30):
            t0 = time.perf_counter()
            await branch.exec("true")
            branch_exec.append(ms(t0))

        other = await pool.acquire()
        size_mb = int((await sb.exec(MAKE_REPO, timeout=300)).stdout.split()[-1])
        base = await sb.snapshot()
        await other.restore(base)  # the second sandbox starts from the same repository
        # Like a task's checkout, the repository predates the search: git (built without sub-second mtimes)
        # re-hashes files written in the same second as its index, once; let that second pass.
        await asyncio.sleep(1.1)
        await sb.snapshot()
        await other.restore(base)
        fork = []
        for i in range(10):
            await sb.exec(f"echo 'change {i}' >> pkg{i}/mod0.py; echo new > new{i}.txt")
            t0 = time.perf_counter()
            sid = await sb.snapshot()
            await other.restore(sid)
            fork.append(ms(t0))
        assert (await other.read_file("new9.txt")) == "new\n"
        await pool.release(sb)
        await pool.release(other)

    async def one(i: int) -> None:
        box = await DockerSandbox.start(config)
        try:
            res = await box.exec(f"python3 -c 'print(sum(range({i} * 10**6)))'")
            assert res.ok, res
        finally:
            await box.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(8)))
    parallel = time.perf_counter() - t0

    p50 = statistics.median
    return {
        "cold_start_ms_p50": round(p50(cold), 1),
        "warm_acquire_ms_p50": round(p50(acquire), 3),
        "exec_ms_p50": round(p50(ours), 2),
        "exec_ms_p95": round(pct(ours, 0.95), 2),
        "docker_py_exec_ms_p50": round(p50(dpy), 2),
        "docker_cli_exec_ms_p50": round(p50(cli), 2),
        "exec_ratio_vs_docker_py": round(p50(ours) / p50(dpy), 3),
        "branch_exec_ms_p50": round(p50(branch_exec), 2),
        "acquire_ratio_vs_cold": round(p50(acquire) / p50(cold), 5),
        "fork_ms_p50": round(p50(fork), 1),
        "fork_repo_mb": size_mb,
        "parallel8_wall_s": round(parallel, 2),
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
