"""Search rollouts as Ray tasks on the two-node cluster: best-of-N rollouts and MCTS expansions run on the
worker nodes, each restoring its workspace from a snapshot shipped through the object store, and the search
comes out as it does in process (same seeds, same tree, same budget use)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from .conftest import ROOT


def test_best_of_n_and_mcts_with_executor_ray_equal_the_in_process_search(ray_cluster: Any):
    argv = ray_cluster.wrap([sys.executable, "-m", "tests.scale.search_driver", ray_cluster.address])
    proc = subprocess.run(argv, check=False,
                          cwd=ROOT, env={**ray_cluster.env}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for kind in ("best_of_n", "mcts"):
        local, remote = out[kind]["in_process"], out[kind]["ray"]
        assert remote["candidates"] == local["candidates"]
        assert remote["best"] == local["best"]
        assert remote["used"] == local["used"]
        assert local["pids"] == [out["driver_pid"]]
        assert out["driver_pid"] not in remote["pids"]  # every step ran in a Ray worker
    assert len(out["best_of_n"]["ray"]["pids"]) >= 2  # rollouts spread over the workers of both nodes
