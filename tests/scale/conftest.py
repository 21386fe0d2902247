"""One real Ray cluster per test module: a head and a second node, each a `ray start` process, in a private
network namespace that has only a loopback interface (see `agentflow.executors.local_cluster`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.swe_fixtures import EXAMPLES, GOLD_FILE, ROOT, TASKS_FILE, _private_cache, docker_image, read_jsonl

__all__ = ["EXAMPLES", "GOLD_FILE", "ROOT", "TASKS_FILE", "_private_cache", "docker_image", "ray_cluster",
           "read_jsonl", "run_driver"]

# a node that dies is noticed within a few seconds (Ray's defaults take about half a minute)
FAST_HEALTH = {"RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "1000",
               "RAY_health_check_failure_threshold": "3"}


def _netns_possible() -> str | None:
    if os.geteuid() != 0:
        return "a private network namespace needs root"
    missing = [tool for tool in ("unshare", "nsenter", "ip") if shutil.which(tool) is None]
    return f"missing {', '.join(missing)}" if missing else None


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A head (1 CPU) and a second node (1 CPU); `ray_cluster.nodes[1]` is the second node."""
    from agentflow.executors.local_cluster import LocalRayCluster

    reason = _netns_possible()
    if reason is not None:
        pytest.skip(reason)
    env = {"PYTHONPATH": str(ROOT), "AGENTFLOW_CACHE_DIR": os.environ["AGENTFLOW_CACHE_DIR"], **FAST_HEALTH}
    cluster = LocalRayCluster(env=env)
    try:
        cluster.add_node(cpus=1)
        cluster.add_node(cpus=1)
        yield cluster
    finally:
        cluster.stop()


def run_driver(cluster: object, argv: list[str], *, wait: bool = True, **kw: object) -> subprocess.Popen[str]:
    """`agentflow ARGV` as a driver process inside the cluster's network namespace."""
    agentflow = str(Path(sys.executable).parent / "agentflow")
    proc = subprocess.Popen(cluster.wrap([agentflow, *argv]), cwd=ROOT, env={**cluster.env}, text=True,  # type: ignore[attr-defined]
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    if wait:
        proc.communicate(timeout=900)
    return proc
