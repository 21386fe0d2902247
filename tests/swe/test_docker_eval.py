"""The harness in the hardened Docker sandbox (no network, non-root, read-only root)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentflow.swe.evaluate import EvalConfig, evaluate_predictions
from agentflow.swe.tasks import Prediction, load_predictions, load_tasks

from .conftest import GOLD_FILE, TASKS_FILE

pytestmark = pytest.mark.docker


async def test_gold_resolves_and_wrong_patch_does_not_in_docker(docker_image: str, tmp_path: Path):
    tasks = load_tasks(TASKS_FILE)
    gold = {p.instance_id: p for p in load_predictions(GOLD_FILE)}
    picked = ["tabkit__tabkit-3", "verspec__verspec-3", "cachette__cachette-1"]
    preds = [gold[i] for i in picked[:2]]
    # cachette-1 gets cachette-2's fix: applies cleanly, fixes the wrong bug
    preds.append(Prediction(instance_id=picked[2], model_name_or_path="m", model_patch=gold["cachette__cachette-2"].model_patch))
    cfg = EvalConfig.model_validate({"backend": "docker", "workers": 2, "sandbox": {"image": docker_image}})
    full = await evaluate_predictions(tasks, preds, cfg, out_dir=tmp_path)
    assert full["resolved_ids"] == sorted(picked[:2])
    assert full["unresolved_ids"] == [picked[2]]
    assert full["error_instances"] == 0
    log = (tmp_path / "gold" / picked[0] / "run_instance.log").read_text()
    # the sandbox's own python (not the host's), starting pytest through the harness's runner script
    assert "$ python3 .agentflow_eval/agentflow_pytest.py " in log
    assert json.loads((tmp_path / "report.json").read_text())["completed_instances"] == 3
