"""The executor seam without Docker: what `import agentflow` loads, bad flags, and `eval --executor ray` on a
local Ray started for the command (loopback only) giving the in-process report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentflow.cli.main import run

from .conftest import GOLD_FILE, TASKS_FILE


def test_the_package_the_cli_and_bench_eval_do_not_import_ray():
    code = ("import sys, agentflow, agentflow.cli.main, agentflow.repair.run.runs, agentflow.swe.evaluate, "
            "agentflow.executors; agentflow.executors.ExecutorConfig; print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--executor", "dask"], "--executor must be one of in-process, ray, got 'dask'"),
        (["--ray-address", "127.0.0.1:6379"], "--ray-address needs --executor ray"),
        (["--executor", "ray", "--task-cpus", "0"], "task_cpus"),
    ],
)
def test_bad_executor_flags_are_one_line_errors(flags: list[str], message: str, tmp_path: Path, capsys):
    argv = ["eval", str(GOLD_FILE), "-t", str(TASKS_FILE), "-o", str(tmp_path / "out"), *flags]
    assert run(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_eval_on_a_local_ray_started_for_the_command_matches_in_process(tmp_path: Path, capsys):
    ids = ["-i", "inikit__inikit-1", "-i", "cachette__cachette-2", "-i", "tabkit__tabkit-2"]
    base = ["eval", str(GOLD_FILE), "-t", str(TASKS_FILE), "--sandbox", "local", "-w", "2", "--json", *ids]
    assert run([*base, "-o", str(tmp_path / "local")]) == 0
    local = json.loads(capsys.readouterr().out)
    assert run([*base, "-o", str(tmp_path / "ray"), "--executor", "ray"]) == 0
    remote = json.loads(capsys.readouterr().out)
    assert remote == local
    assert remote["resolved_instances"] == 3
    for iid in ("inikit__inikit-1", "cachette__cachette-2", "tabkit__tabkit-2"):
        ray_report = json.loads((tmp_path / "ray" / "gold" / iid / "report.json").read_text())
        local_report = json.loads((tmp_path / "local" / "gold" / iid / "report.json").read_text())
        assert ray_report[iid]["tests_status"] == local_report[iid]["tests_status"]


def test_in_process_the_run_budget_stops_the_run_and_resume_counts_what_was_spent(tmp_path: Path):
    from tests.swe_fixtures import read_jsonl

    from .test_ray_eval_bench import BENCH_IDS, _costly_cassette

    for iid in BENCH_IDS:
        _costly_cassette(tmp_path / f"{iid}.json", answers=60, usd=0.01)
    out = tmp_path / "run"
    argv = ["bench", str(TASKS_FILE), "--model", f"replay:{tmp_path / '{instance_id}.json'}", "--sandbox", "local",
            "-o", str(out), "-c", "tests.feedback=task", "-c", "mutants=false", "-c", "limits.run_budget_usd=0.03", "--workers", "1"]
    for iid in BENCH_IDS:
        argv += ["-i", iid]
    assert run(argv) == 0
    outcomes = [json.loads(p.read_text()) for p in (out / "instances").glob("*/outcome.json")]
    assert [(o["status"], o["limit"]) for o in outcomes] == [("limits_exceeded", "usd")]
    assert 0.03 - 1e-9 <= outcomes[0]["usage"]["usd"] <= 0.04 + 1e-9
    budget_events = [e for e in read_jsonl(out / "events.jsonl") if e["kind"] == "run.budget_exceeded"]
    assert len(budget_events[0]["data"]["not_started"]) == 2
    # the limit holds across --resume: what the first run spent counts, so nothing more starts
    assert run([*argv, "--resume"]) == 0
    assert len(list((out / "instances").glob("*/outcome.json"))) == 1


def test_serve_with_the_ray_executor_is_refused_before_anything_starts(tmp_path: Path, capsys):
    argv = ["bench", str(TASKS_FILE), "--serve", "llamacpp:gemma3-270m", "--executor", "ray", "-o", str(tmp_path / "run")]
    assert run(argv) == 2
    assert "--serve cannot be combined with --executor ray" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
