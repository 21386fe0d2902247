"""The shipped example tasks are sound, and the harness grades them like SWE-bench: checked end to end in
real local sandboxes (FAIL_TO_PASS fail at base and pass with the gold patch; PASS_TO_PASS pass in both)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentflow.cli.main import run
from agentflow.sandbox import open_sandbox
from agentflow.swe.evaluate import EvalConfig, evaluate_predictions, run_prediction
from agentflow.swe.tasks import load_predictions, load_tasks

from .conftest import GOLD_FILE, TASKS_FILE, read_jsonl, write_jsonl

TASKS = load_tasks(TASKS_FILE)
IDS = {t.instance_id for t in TASKS}


def test_at_least_twelve_tasks_over_several_repositories():
    assert len(TASKS) >= 12
    assert len({t.repo for t in TASKS}) >= 4
    gold = load_predictions(GOLD_FILE)
    assert {p.instance_id for p in gold} == IDS
    for task in TASKS:
        # problem statements read like reports, not like the diff
        assert len(task.problem_statement) > 200
        assert "diff --git" not in task.problem_statement


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.instance_id)
async def test_fail_to_pass_fails_and_pass_to_pass_passes_at_base(task):
    async with open_sandbox("local") as sb:
        report = await run_prediction(sb, task, "", run_empty=True, rerun_failed=False)
    assert report.completed, report.error
    status = report.tests_status
    assert status["FAIL_TO_PASS"]["success"] == []
    assert sorted(status["FAIL_TO_PASS"]["failure"]) == sorted(task.FAIL_TO_PASS)
    assert status["PASS_TO_PASS"]["failure"] == []
    assert not report.resolved


def _summary(full: dict) -> dict:
    return {k: v for k, v in full.items() if k != "instances"}


async def test_gold_resolves_every_task(tmp_path: Path):
    gold = load_predictions(GOLD_FILE)
    full = await evaluate_predictions(TASKS, gold, EvalConfig(backend="local", workers=2), out_dir=tmp_path)
    assert full["resolved_instances"] == full["total_instances"] == len(TASKS)
    assert full["unresolved_instances"] == full["error_instances"] == full["empty_patch_instances"] == 0
    assert full["resolved_ids"] == sorted(IDS)
    for iid, inst in full["instances"].items():
        assert inst["patch_successfully_applied"] and inst["resolved"], iid
        assert inst["tests_status"]["FAIL_TO_PASS"]["failure"] == []
    saved = json.loads((tmp_path / "report.json").read_text())
    assert _summary(saved) == _summary(full)
    one = TASKS[0].instance_id
    per_instance = json.loads((tmp_path / "gold" / one / "report.json").read_text())
    assert per_instance[one]["resolved"] is True
    assert set(per_instance[one]) >= {"patch_is_None", "patch_exists", "patch_successfully_applied", "resolved", "tests_status"}


def test_cli_empty_wrong_and_broken_patches(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    gold = read_jsonl(GOLD_FILE)
    by_id = {g["instance_id"]: g for g in gold}
    preds = [{"instance_id": iid, "model_name_or_path": "empty", "model_patch": ""} for iid in sorted(IDS)]
    path = write_jsonl(tmp_path / "empty.jsonl", preds)
    assert run(["eval", str(path), "--tasks", str(TASKS_FILE), "--json", "--sandbox", "local", "-o", str(tmp_path / "e")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["resolved_instances"] == 0
    assert summary["empty_patch_instances"] == summary["total_instances"] == len(IDS)

    # a patch that applies but fixes the wrong thing, and one that cannot apply
    inikit1, inikit2, tabkit1 = "inikit__inikit-1", "inikit__inikit-2", "tabkit__tabkit-1"
    wrong = by_id[inikit2]["model_patch"]  # fixes inikit's getbool, not the '=' parsing of inikit-1
    broken = by_id[inikit1]["model_patch"].replace('stripped.split("=")', 'stripped.partition("=")')
    mixed = [
        {"instance_id": inikit1, "model_name_or_path": "m", "model_patch": wrong},
        {"instance_id": inikit2, "model_name_or_path": "m", "model_patch": by_id[inikit2]["model_patch"]},
        {"instance_id": tabkit1, "model_name_or_path": "m", "model_patch": broken},
    ]
    path = write_jsonl(tmp_path / "mixed.jsonl", mixed)
    out = tmp_path / "m"
    assert run(["eval", str(path), "--tasks", str(TASKS_FILE), "--json", "--sandbox", "local", "-o", str(out), "-w", "2"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["resolved_ids"] == [inikit2]
    assert summary["unresolved_ids"] == [inikit1]
    assert summary["error_ids"] == [tabkit1]
    assert summary["submitted_instances"] == 3 and summary["completed_instances"] == 2
    assert len(summary["incomplete_ids"]) == len(IDS) - 3
    report = json.loads((out / "report.json").read_text())["instances"]
    task1 = next(t for t in TASKS if t.instance_id == inikit1)
    assert report[inikit1]["tests_status"]["FAIL_TO_PASS"]["failure"] == task1.FAIL_TO_PASS
    assert report[inikit1]["patch_successfully_applied"] is True
    assert report[tabkit1]["patch_successfully_applied"] is False and "did not apply" in report[tabkit1]["error"]


def test_cli_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"instance_id": "inikit__inikit-1", "model_patch": ""}\n{broken\n')
    assert run(["eval", str(preds), "--tasks", str(TASKS_FILE), "--sandbox", "local"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "p.jsonl:2: malformed prediction line" in err

    assert run(["eval", str(tmp_path / "missing.jsonl"), "--tasks", str(TASKS_FILE)]) == 2
    assert "not found" in capsys.readouterr().err

    unknown = write_jsonl(tmp_path / "u.jsonl", [{"instance_id": "nope__nope-1", "model_patch": "x"}])
    assert run(["eval", str(unknown), "--tasks", str(TASKS_FILE), "--sandbox", "local"]) == 2
    assert "unknown instance id 'nope__nope-1'" in capsys.readouterr().err

    gold = GOLD_FILE
    assert run(["eval", str(gold), "--tasks", str(TASKS_FILE), "-i", "nope"]) == 2
    assert "unknown instance id 'nope'" in capsys.readouterr().err

    assert run(["eval", str(gold), "--tasks", str(TASKS_FILE), "--sandbox", "podman"]) == 2
    assert "--sandbox must be" in capsys.readouterr().err
