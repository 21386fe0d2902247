"""`eval` and `bench` with `--executor ray` on a real two-node Ray cluster (separate `ray start` processes on
loopback), compared with the in-process executor; faults: a node killed mid-run, a driver killed with -9."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from agentflow.swe.evaluate import EvalConfig, evaluate_predictions
from agentflow.swe.tasks import load_predictions, load_tasks
from tests.swe_fixtures import kill_9_when

from .conftest import GOLD_FILE, ROOT, TASKS_FILE, read_jsonl, run_driver

pytestmark = pytest.mark.docker

CASSETTES = ROOT / "tests" / "repair" / "cassettes" / "bench"
BENCH_IDS = ["inikit__inikit-1", "cachette__cachette-2", "tabkit__tabkit-2"]
MODEL = f"replay:{CASSETTES / '{instance_id}.json'}"


_DURATIONS = ("duration_s", "wall_seconds", "graph_s", "nodes_s", "seconds", "test_seconds", "longest_test_wait_s",
              "base_test_seconds")


def _without_durations(value: Any) -> Any:
    """`value` without what differs between two runs of the same work: durations, and pytest's timings."""
    if isinstance(value, dict):
        return {k: _without_durations(v) for k, v in value.items() if k not in _DURATIONS}
    if isinstance(value, list):
        return [_without_durations(v) for v in value]
    if isinstance(value, str):
        return re.sub(r" in \d+\.\d+s\b", " in <t>s", value)
    return value


def _tree(root: Path) -> dict[str, Any]:
    """Every file under `root` by relative path (JSON files parsed, durations dropped)."""
    out: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            text = path.read_text()
            out[str(path.relative_to(root))] = _without_durations(json.loads(text) if path.suffix == ".json" else text)
    return out


def _watch(proc: Any, nodes: list[Any], prefix: str) -> list[set[str]]:
    """Until `proc` ends: the names of the `prefix` tasks each node was seen running."""
    seen: list[set[str]] = [set() for _ in nodes]
    while proc.poll() is None:
        for i, node in enumerate(nodes):
            seen[i] |= {name for name in node.busy_tasks() if name.startswith(prefix)}
        time.sleep(0.1)
    return seen


def bench_argv(out: Path, image: str, *extra: str) -> list[str]:
    argv = ["bench", str(TASKS_FILE), "--model", MODEL, "--sandbox", "docker", "-c", f"sandbox.image={image}",
            "-o", str(out), "-c", "tests.feedback=task", "-c", "mutants=false", "-c", "edit.format=search_replace"]
    for iid in BENCH_IDS:
        argv += ["-i", iid]
    return argv + list(extra)


def ray_argv(cluster: Any) -> list[str]:
    return ["--executor", "ray", "--ray-address", cluster.address]


async def test_eval_of_the_gold_predictions_over_both_nodes_equals_the_in_process_report(
        ray_cluster: Any, docker_image: str, tmp_path: Path):
    local_out, ray_out = tmp_path / "in-process", tmp_path / "ray"
    cfg = EvalConfig.model_validate({"backend": "docker", "workers": 2, "sandbox": {"image": docker_image}})
    await evaluate_predictions(load_tasks(TASKS_FILE), load_predictions(GOLD_FILE), cfg, out_dir=local_out)

    proc = run_driver(ray_cluster, ["eval", str(GOLD_FILE), "-t", str(TASKS_FILE), "--sandbox", "docker",
                                    "-c", f"sandbox.image={docker_image}", "-w", "2", "-o", str(ray_out), "--json",
                                    *ray_argv(ray_cluster)], wait=False)
    seen = _watch(proc, ray_cluster.nodes, "eval:")
    stdout, stderr = proc.communicate()
    assert proc.returncode == 0, stderr[-2000:]
    assert all(seen), f"each node ran some evaluations: {seen}"
    summary = json.loads(stdout)
    assert summary["resolved_instances"] == summary["total_instances"] == 15
    assert _tree(ray_out) == _tree(local_out)  # report.json and every per-instance file


def test_bench_with_replayed_cassettes_gives_the_same_predictions(ray_cluster: Any, docker_image: str,
                                                                    tmp_path: Path):
    from agentflow.cli.main import run

    local_out, ray_out = tmp_path / "in-process", tmp_path / "ray"
    assert run(bench_argv(local_out, docker_image, "--workers", "2")) == 0
    proc = run_driver(ray_cluster, [*bench_argv(ray_out, docker_image, "--workers", "2"), *ray_argv(ray_cluster)])
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    assert read_jsonl(ray_out / "preds.jsonl") == read_jsonl(local_out / "preds.jsonl")
    for iid in BENCH_IDS:
        local_outcome = json.loads((local_out / "instances" / iid / "outcome.json").read_text())
        ray_outcome = json.loads((ray_out / "instances" / iid / "outcome.json").read_text())
        assert _without_durations(ray_outcome) == _without_durations(local_outcome)
        assert _without_durations(read_jsonl(ray_out / "instances" / iid / "candidates.jsonl")) == \
            _without_durations(read_jsonl(local_out / "instances" / iid / "candidates.jsonl"))
    local_report = json.loads((local_out / "report.json").read_text())
    ray_report = json.loads((ray_out / "report.json").read_text())
    assert _without_durations(ray_report) == _without_durations(local_report)
    kinds = [e["kind"] for e in read_jsonl(ray_out / "events.jsonl")]
    local_kinds = [e["kind"] for e in read_jsonl(local_out / "events.jsonl")]
    assert sorted(k for k in kinds if not k.startswith("executor.")) == sorted(local_kinds)


def _starts(out: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in read_jsonl(out / "events.jsonl"):
        if event["kind"] == "repair.start":
            counts[event["node_id"]] = counts.get(event["node_id"], 0) + 1
    return counts


def _owns_a_sandbox(pid: int) -> bool:
    """Whether the process `pid` has a sandbox container (the label every sandbox carries)."""
    from agentflow.sandbox.docker import LABEL, docker_client

    return bool(docker_client().api.containers(filters={"label": f"{LABEL}.pid={pid}"}))


def _frozen_mid_task(pid: int) -> bool:
    """Stop the worker `pid` (SIGSTOP): True when it is then certain to be inside its task, so that killing the
    node loses the task; else the worker goes on (SIGCONT).

    Certain, not likely: a task's body records its start in the run's ledger before it makes a sandbox, and
    removes its sandboxes (each removal waited for) before it returns. So a sandbox of a stopped worker means
    the start is recorded and no result was handed back: the kill has to retry the task. Timing-based choices
    (busy for a second, no outcome after a wait) lost this race on a loaded machine."""
    if not _owns_a_sandbox(pid):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGSTOP)
    if _owns_a_sandbox(pid):
        return True
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)
    return False


def test_killing_the_second_node_mid_run_still_completes_every_task_exactly_once(
        ray_cluster: Any, docker_image: str, tmp_path: Path):
    out = tmp_path / "run"
    second = ray_cluster.nodes[1]
    proc = run_driver(ray_cluster, [*bench_argv(out, docker_image, "--workers", "2"), *ray_argv(ray_cluster)],
                      wait=False)
    victim = None
    deadline = time.monotonic() + 300
    try:
        while victim is None and proc.poll() is None and time.monotonic() < deadline:
            busy = {n: pid for n, pid in second.busy_tasks().items() if n.startswith("repair:")}
            victim = next((n for n, pid in busy.items() if _frozen_mid_task(pid)), None)
            time.sleep(0.05)
        assert victim is not None, "no task ran on the second node"
        second.kill()
        _, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
        from agentflow.sandbox.docker import reap_orphans

        reap_orphans()  # the killed node's container
        ray_cluster.nodes.remove(second)
        ray_cluster.add_node(cpus=1)  # the next test has two nodes again
    assert proc.returncode == 0, stderr[-2000:]
    preds = read_jsonl(out / "preds.jsonl")
    assert sorted(p["instance_id"] for p in preds) == sorted(BENCH_IDS)  # each once, none lost
    assert _starts(out) == {iid: 1 for iid in BENCH_IDS}  # the lost attempt left nothing in the run directory
    events = read_jsonl(out / "events.jsonl")
    retried = [e for e in events if e["kind"] == "executor.retry"]
    assert [e["node_id"] for e in retried] == [victim.removeprefix("repair:")]
    assert retried[0]["data"]["attempts"] == 2
    report = json.loads((out / "report.json").read_text())
    assert sorted(report["resolved_ids"]) == sorted(BENCH_IDS)


def test_driver_killed_with_kill_9_resumes_without_redoing_finished_tasks(
        ray_cluster: Any, docker_image: str, tmp_path: Path):
    out = tmp_path / "run"
    proc = run_driver(ray_cluster, [*bench_argv(out, docker_image, "--workers", "1"), *ray_argv(ray_cluster)],
                      wait=False)
    instances = out / "instances"
    kill_9_when(proc, lambda: instances.is_dir() and bool(list(instances.glob("*/outcome.json"))), timeout=300,
                what="bench")
    finished = {p.parent.name: p.read_text() for p in (out / "instances").glob("*/outcome.json")}
    assert 1 <= len(finished) < len(BENCH_IDS)

    resumed = run_driver(ray_cluster, [*bench_argv(out, docker_image, "--resume"), *ray_argv(ray_cluster)])
    assert resumed.returncode == 0
    counts = _starts(out)
    for iid, text in finished.items():
        assert counts[iid] == 1, f"{iid} was redone"
        assert (out / "instances" / iid / "outcome.json").read_text() == text
    preds = read_jsonl(out / "preds.jsonl")
    assert sorted(p["instance_id"] for p in preds) == sorted(BENCH_IDS)
    assert sorted(json.loads((out / "report.json").read_text())["resolved_ids"]) == sorted(BENCH_IDS)


def _costly_cassette(path: Path, answers: int, usd: float) -> None:
    """A cassette whose every answer changes nothing and costs `usd`: a task spends until a limit stops it."""
    reply = {"choices": [{"message": {"role": "assistant", "content": "I am not sure."}, "finish_reason": "stop"}],
             "usage": {"input_tokens": 100, "output_tokens": 20, "cost_usd": usd}, "model": "scripted"}
    path.write_text(json.dumps({"version": 1, "match": "sequence",
                                "interactions": [{"response": reply}] * answers}))


def test_the_run_budget_stops_every_node(ray_cluster: Any, docker_image: str, tmp_path: Path):
    cassettes = tmp_path / "cassettes"
    cassettes.mkdir()
    for iid in BENCH_IDS:
        _costly_cassette(cassettes / f"{iid}.json", answers=60, usd=0.01)
    out = tmp_path / "run"
    # alone, a task makes 4 calls ($0.04): every task that starts is stopped by the run's $0.03; the first two
    # start together, one on each node
    argv = [*bench_argv(out, docker_image, "--workers", "2"), *ray_argv(ray_cluster),
            "--model", f"replay:{cassettes / '{instance_id}.json'}", "-c", "limits.run_budget_usd=0.03"]
    proc = run_driver(ray_cluster, argv)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    outcomes = [json.loads(p.read_text()) for p in (out / "instances").glob("*/outcome.json")]
    events = read_jsonl(out / "events.jsonl")
    placed = {e["node_id"]: e["data"]["nodes"][-1] for e in events if e["kind"] == "executor.task"}
    assert [(o["status"], o["limit"]) for o in outcomes] == [("limits_exceeded", "usd")] * len(outcomes)
    assert len({placed[o["instance_id"]] for o in outcomes}) == 2, "tasks on both nodes were stopped"
    spent = sum(o["usage"]["usd"] for o in outcomes)
    # each running task may finish the call it was in when the limit was reached, no more
    assert 0.03 - 1e-9 <= spent <= 0.03 + 0.01 * 2 + 1e-9
    not_started = [e["data"]["not_started"] for e in events if e["kind"] == "run.budget_exceeded"]
    assert len(outcomes) + sum(len(n) for n in not_started) == len(BENCH_IDS)
