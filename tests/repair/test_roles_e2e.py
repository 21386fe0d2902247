"""The planner, critic and verifier roles of the repair workflow, each with its own (replayed) model, in Docker.

Every role's calls go through `model_loader`, wrapped in a recorder so the test can read what each role was
asked: the plan reaches the coder, the critic's review of a failed attempt reaches the next attempt, and the
verifier model breaks a tie the tests and the vote cannot.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentflow.events import EventLog
from agentflow.models.replay import RecordingModel, ReplayModel
from agentflow.repair.config import load_repair_config
from agentflow.repair.run.solve import repair_task
from agentflow.swe.tasks import load_tasks

from .conftest import TASKS_FILE, scripted_cassette

pytestmark = pytest.mark.docker

PLAN = "The bug is in loads() in inikit/parser.py: it splits the line at every '='; split at the first one only."
REVIEW = "Splitting into three parts still drops everything after the second '='. Use a maxsplit of 1."


def edit(new: str, old: str = '        parts = stripped.split("=")') -> str:
    return f"inikit/parser.py\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\nEND_EDITS"


def recorded_user_messages(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    return [i["request"]["messages"][-1]["content"] for i in data["interactions"]]


def run_roles(tmp_path: Path, image: str, overrides: list[str], models: dict[str, list[str]]) -> tuple[dict, Path]:
    specs = {role: str(scripted_cassette(tmp_path / f"{role}.json", answers)) for role, answers in models.items()}
    recorders: list[RecordingModel] = []

    def loader(spec: str) -> RecordingModel:
        role = next(r for r, p in specs.items() if p == spec.removeprefix("replay:"))
        rec = RecordingModel(ReplayModel(spec.removeprefix("replay:")), tmp_path / f"{role}.rec.json")
        recorders.append(rec)
        return rec

    cfg = load_repair_config(
        [f"sandbox.image={image}", "backend=docker", "search.concurrency=1", "edit.format=search_replace", f"model=replay:{specs['coder']}",
         *[f"roles.{role}=replay:{specs[role]}" for role in specs if role != "coder"], *overrides]
    )
    task = next(t for t in load_tasks(TASKS_FILE) if t.instance_id == "inikit__inikit-1")
    import asyncio

    async def go() -> dict:
        with EventLog(tmp_path / "events.jsonl") as events:
            outcome = await repair_task(task, cfg, events=events, inst_dir=tmp_path / "inst", model_loader=loader)
        return outcome.model_dump(mode="json")

    return asyncio.run(go()), tmp_path


def test_plan_and_critique_reach_the_coder(docker_image: str, tmp_path: Path):
    outcome, d = run_roles(
        tmp_path, docker_image, ["tests.feedback=task", "mutants=false", "search.max_attempts=2", "rank=false"],
        {
            # the second attempt builds on the first one's patch
            "coder": [edit('        parts = stripped.split("=", 2)'),
                      edit('        parts = stripped.split("=", 1)', old='        parts = stripped.split("=", 2)')],
            "planner": [PLAN],
            "critic": [REVIEW],
        },
    )
    assert outcome["plan"] == PLAN and outcome["report"]["resolved"] is True
    first, second = recorded_user_messages(d / "coder.rec.json")
    assert PLAN in first and PLAN in second
    assert REVIEW not in first and REVIEW in second  # the review of the failed first attempt
    assert "FAILED" in second or "assert" in second  # next to its test output
    critic_prompt = recorded_user_messages(d / "critic.rec.json")[0]
    assert 'split("=", 2)' in critic_prompt  # the critic saw the failed patch


def test_the_verifier_model_breaks_a_tie(docker_image: str, tmp_path: Path):
    # blind, no reproduction: both candidates pass the repository's tests and the vote is 1:1
    judge_low = json.dumps({"score": 0.2, "evidence": ["three parts"], "summary": "still cuts the value"})
    judge_high = json.dumps({"score": 0.9, "evidence": ["maxsplit 1"], "summary": "keeps the whole value"})
    outcome, d = run_roles(
        tmp_path, docker_image, ["reproduce=false", "rank=false", "search.strategy=best_of_n", "search.n=2", "search.max_attempts=1"],
        {
            "coder": [edit('        parts = stripped.split("=", 2)'), edit('        parts = stripped.split("=", 1)')],
            "verifier": [judge_low, judge_high],
        },
    )
    assert outcome["chosen_by"] == "verifier" and outcome["chosen"] == "inikit__inikit-1/b1.1"  # the 2nd branch's
    assert outcome["report"]["resolved"] is True
    assert len(recorded_user_messages(d / "verifier.rec.json")) == 2
