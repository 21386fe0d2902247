"""A graph search's steps as Ray tasks on the two-node cluster (`agentflow run --executor ray`): best-of-N
branches and MCTS expansions run in worker processes, each in a fresh sandbox at its branch's workspace
(shipped as snapshot objects through the object store), and the search comes out as it does in process: the
same tree, values and choice, the same state and checkpoints in every branch's thread (each naming the same
workspace diff), the same usage and the same patch. A driver killed mid-step resumes from those checkpoints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.scale.search_driver import workflow
from tests.swe_fixtures import kill_9_when

from .conftest import ROOT, run_driver

CASES: dict[str, dict[str, Any]] = {
    "best_of_n": {"n": 4, "concurrency": 4, "gather": ["pids"]},
    "mcts": {"strategy": "mcts", "n": 4, "expand": 2, "max_depth": 2, "concurrency": 1, "gather": ["pids"]},
}
STATE_KEYS = ("notes", "score", "depth", "steps", "diff")


def _argv(tmp: Path, name: str, search: dict[str, Any], extra: list[str], **inputs: str) -> list[str]:
    wf = tmp / f"{name}.yaml"
    wf.write_text(json.dumps(workflow(search)))
    given = json.dumps({"task": "notes", **inputs})
    return ["run", str(wf), "-o", str(tmp / name), "--thread-id", "t", "--json", "-i", given, *extra]


def _finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, (out[-2000:], err[-3000:])
    result = json.loads(out.strip().splitlines()[-1])
    assert result["status"] == "done", result["errors"]
    return dict(result)


def _run(cluster: Any, tmp: Path, name: str, search: dict[str, Any], extra: list[str]) -> dict[str, Any]:
    return _finish(run_driver(cluster, _argv(tmp, name, search, extra), wait=False))


def _repo(tmp: Path) -> Path:
    repo = tmp / "repo"
    repo.mkdir(exist_ok=True)
    (repo / "README").write_text("a workspace\n")
    return repo


def _branches(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Each branch thread's last checkpoint: its state and the workspace diff it names."""
    from agentflow.graph.persist.checkpoint import AgentflowSaver
    from agentflow.graph.run.history import DIFF_KEY, DiffStore

    saver = AgentflowSaver(run_dir / "checkpoints.db", keep_last=None)
    try:
        threads = {t.config["configurable"]["thread_id"] for t in saver.list(None)} - {"t"}
        out = {}
        for thread in sorted(threads):
            last = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
            assert last is not None
            digest = last.metadata.get(DIFF_KEY)
            out[thread] = {"state": {k: last.checkpoint["channel_values"].get(k) for k in STATE_KEYS},
                           "workspace": DiffStore(run_dir).get(digest) if digest else None}
        return out
    finally:
        saver.close()


def _events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("sandbox", [None, pytest.param("docker", marks=pytest.mark.docker)])
def test_best_of_n_and_mcts_on_ray_equal_the_in_process_search(ray_cluster: Any, tmp_path: Path,
                                                               sandbox: str | None) -> None:
    extra = ["--sandbox", sandbox, "--workspace", str(_repo(tmp_path))] if sandbox is not None else []
    on_ray = ["--executor", "ray", "--ray-address", ray_cluster.address]
    for kind, search in CASES.items():
        local = _run(ray_cluster, tmp_path, f"{kind}-local", search, extra)
        remote = _run(ray_cluster, tmp_path, f"{kind}-ray", search, [*extra, *on_ray])
        report, local_report = remote["state"]["report"], local["state"]["report"]
        assert {**report, "restores": 0} == {**local_report, "restores": 0}  # the tree, every value, the choice
        assert len(report["branches"]) == 4 and not any(b["error"] for b in report["branches"])
        if kind == "mcts":
            assert any(b["parent"] != "root" for b in report["branches"])  # children went on from their parents
        for key in STATE_KEYS:
            assert remote["state"][key] == local["state"][key], key
        used = {k: v for k, v in remote["usage"].items() if k != "wall_seconds"}
        assert used == {k: v for k, v in local["usage"].items() if k != "wall_seconds"}
        assert used["tool_calls"] > 0  # each step's tool call, charged to the run's budget
        # every step of every branch ran in a worker process, none in the driver
        driver, pids = remote["state"]["driver"], remote["state"]["pids"]
        assert local["state"]["pids"] == [local["state"]["driver"]] and driver not in pids
        if kind == "best_of_n":
            assert len(pids) >= 2  # branches spread over the workers
        # the checkpoints each branch's steps wrote are in the driver's checkpointer, as in process
        local_dir, ray_dir = Path(local["run_dir"]), Path(remote["run_dir"])
        assert _branches(ray_dir) == _branches(local_dir)
        # the steps' events reached the driver's log, tagged with their search and branch
        ran = [{(e["data"]["branch"], e["node_id"]) for e in _events(d) if e["kind"] == "node.end" and e["data"].get("branch")
                and e["data"].get("search") == "go"} for d in (local_dir, ray_dir)]
        assert ran[0] == ran[1] and {b for b, _ in ran[1]} == {b["id"] for b in report["branches"]}
        if sandbox is not None:
            patch = (ray_dir / "patch.diff").read_text()
            assert patch == (local_dir / "patch.diff").read_text() == remote["state"]["diff"]
            assert "+++ b/notes.txt" in patch
            assert all(b["workspace"] for b in _branches(ray_dir).values())


@pytest.mark.docker
def test_kill_9_of_the_driver_mid_step_then_resume_on_ray(ray_cluster: Any, tmp_path: Path) -> None:
    """The driver is killed while a worker runs MCTS branch b2's step; the resumed run takes b0 and b1 from the
    checkpoints their remote steps left in its checkpointer (with their workspaces), runs b2's step again from
    its parent's checkpoint and workspace, then b3."""
    on_ray = ["--executor", "ray", "--ray-address", ray_cluster.address]
    flag = tmp_path / "flag"
    argv = _argv(tmp_path, "mcts", CASES["mcts"], ["--sandbox", "docker", "--workspace", str(_repo(tmp_path)), *on_ray],
                 pause="b2", flag=str(flag))
    kill_9_when(run_driver(ray_cluster, argv, wait=False), Path(f"{flag}.ready").exists, timeout=300, what="search")
    # the executor is not recorded with the run: the resume names it again
    resumed = _finish(run_driver(ray_cluster, ["run", "-o", str(tmp_path / "mcts"), "--resume", "t", "--json",
                                               *on_ray], wait=False))
    report = resumed["state"]["report"]
    assert len(report["branches"]) == 4 and not any(b["error"] for b in report["branches"])
    run_dir = Path(resumed["run_dir"])
    events = _events(run_dir)
    kinds = {(e["data"].get("event"), e["node_id"]) for e in events if e["kind"] == "search.branch"}
    assert {("reused", "go/b0"), ("reused", "go/b1"), ("resume", "go/b2"), ("start", "go/b3")} <= kinds
    (resume,) = [e for e in events if e["kind"] == "search.resume"]
    assert resume["data"]["branches"] == 3 and resume["data"]["finished"] == 2
    # each step found its workspace as its state says (`write` checks), and the run's patch is the chosen one's
    chosen = resumed["state"]["notes"].splitlines()
    patch = (run_dir / "patch.diff").read_text()
    assert [line[1:] for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")] == chosen


def test_a_run_whose_deps_do_not_pickle_is_one_line(ray_cluster: Any) -> None:
    argv = ray_cluster.wrap([sys.executable, "-m", "tests.scale.search_driver", ray_cluster.address])
    proc = subprocess.run(argv, check=False, cwd=ROOT, env={**ray_cluster.env}, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    error = json.loads(proc.stdout.strip().splitlines()[-1])["error"]
    assert error.startswith("search node 'go': ray: the run's deps cannot be sent to a worker: "
                            "cannot pickle '_thread.lock' object"), error
    assert "\n" not in error
