"""`agentflow bench` end to end in Docker: workers, kill -9 then --resume, env_error, outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentflow.cli.main import run
from tests.swe_fixtures import kill_9_when

from .conftest import CASSETTES, ROOT, TASKS_FILE, read_jsonl

pytestmark = pytest.mark.docker

IDS = ["inikit__inikit-1", "cachette__cachette-2", "tabkit__tabkit-2"]
MODEL = f"replay:{CASSETTES / 'bench' / '{instance_id}.json'}"


def bench_argv(out: Path, image: str, *extra: str) -> list[str]:
    argv = [
        "bench",
        str(TASKS_FILE),
        "--model",
        MODEL,
        "--sandbox",
        "docker",
        "-c",
        f"sandbox.image={image}",
        "-o",
        str(out),
        "-c",
        "tests.feedback=task",
        "-c",
        "mutants=false",
        "-c",
        "edit.format=search_replace",
    ]
    for iid in IDS:
        argv += ["-i", iid]
    return argv + list(extra)


def starts(out: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in read_jsonl(out / "events.jsonl"):
        if event["kind"] == "repair.start":
            counts[event["node_id"]] = counts.get(event["node_id"], 0) + 1
    return counts


def test_kill_9_then_resume_does_not_redo_finished_tasks(docker_image: str, tmp_path: Path):
    out = tmp_path / "run"
    agentflow = str(Path(sys.executable).parent / "agentflow")
    proc = subprocess.Popen(
        [agentflow, *bench_argv(out, docker_image, "--workers", "1")],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ},
    )
    instances = out / "instances"
    kill_9_when(proc, lambda: instances.is_dir() and bool(list(instances.glob("*/outcome.json"))), timeout=240,
                what="bench")
    finished = {p.parent.name: p.read_text() for p in (out / "instances").glob("*/outcome.json")}
    assert 1 <= len(finished) < len(IDS)

    assert run(bench_argv(out, docker_image, "--resume")) == 0
    counts = starts(out)
    for iid, text in finished.items():
        assert counts[iid] == 1, f"{iid} was redone"
        assert (out / "instances" / iid / "outcome.json").read_text() == text
    report = json.loads((out / "report.json").read_text())
    assert sorted(report["resolved_ids"]) == sorted(IDS)
    preds = read_jsonl(out / "preds.jsonl")
    assert sorted(p["instance_id"] for p in preds) == sorted(IDS)
    # a run directory with results is never overwritten by accident
    assert run(bench_argv(out, docker_image)) == 2


def test_env_error_is_recorded_the_batch_continues_and_resume_retries_it(docker_image: str, tmp_path: Path):
    lines = [json.loads(line) for line in TASKS_FILE.read_text().splitlines() if line.strip()]
    good = next(t for t in lines if t["instance_id"] == "inikit__inikit-1")
    broken = dict(next(t for t in lines if t["instance_id"] == "cachette__cachette-2"), base_commit="0" * 40)
    for task in (good, broken):
        task["repo"] = str(TASKS_FILE.parent / task["repo"])
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(good) + "\n" + json.dumps(broken) + "\n")
    out = tmp_path / "run"
    argv = [
        "bench",
        str(tasks),
        "--model",
        MODEL,
        "--sandbox",
        "docker",
        "-c",
        f"sandbox.image={docker_image}",
        "-o",
        str(out),
        "--workers",
        "2",
        "--allow-path",
        str(TASKS_FILE.parent),
        "-c",
        "tests.feedback=task",
        "-c",
        "mutants=false",
        "-c",
        "edit.format=search_replace",
    ]
    assert run(argv) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["statuses"] == {"env_error": 1, "submitted": 1}
    assert report["instances"]["cachette__cachette-2"]["status"] == "env_error"
    assert report["resolved_ids"] == ["inikit__inikit-1"]
    assert run([*argv, "--resume"]) == 0
    assert starts(out) == {
        "inikit__inikit-1": 1,
        "cachette__cachette-2": 2,
    }  # infra failure retried, success kept
