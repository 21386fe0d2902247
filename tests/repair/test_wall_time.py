"""A repair task's `--wall-time` ends it at the deadline: the model call in flight (a real, slow
OpenAI-compatible server on loopback) is cut, the task ends `limits_exceeded:wall_seconds` with the best
candidate verified so far submitted, and its events, checkpoints and candidates are kept."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentflow.cli.main import run

from ..models.conftest import FakeServer, fake_server_process
from .conftest import CASSETTES, TASKS_FILE, read_jsonl

WALL_S = 30
"""Time for the task's set-up and its first three model calls (about 4 s on an idle machine, 3 times that on a
busy one), not for the fourth."""


@pytest.fixture
def llm() -> Iterator[FakeServer]:
    with fake_server_process() as server:
        yield server


def test_wall_time_cuts_the_call_in_flight_and_submits_the_best_so_far(llm: FakeServer, tmp_path: Path) -> None:
    # the replies of a scripted repair: the ranking, an edit that changes nothing, a wrong edit, then the fix
    # — which comes far too late
    replies = [i["response"]["choices"][0]["message"]["content"]
               for i in json.loads((CASSETTES / "single_inikit-1.json").read_text())["interactions"]]
    llm.script(*({"content": text} for text in replies[:3]), {"content": replies[3], "delay": 120})
    out = tmp_path / "run"
    code = run(["repair", "--tasks", str(TASKS_FILE), "-i", "inikit__inikit-1", "--sandbox", "local",
                "--model", llm.spec("coder"), "--wall-time", f"{WALL_S}s", "-o", str(out),
                "-c", "concurrency=1", "-c", "edit_format=search_replace", "-c", "feedback=task"])
    assert code == 1  # not `submitted`: the status says which limit ended the task
    inst = out / "instances" / "inikit__inikit-1"
    outcome = json.loads((inst / "outcome.json").read_text())
    assert outcome["status"] == "limits_exceeded:wall_seconds", outcome.get("error")
    assert outcome["duration_s"] < WALL_S + 10, "the 120 s call was not cut"
    assert len(llm.requests()) == 4  # the fourth call was made, then cut
    # the best candidate verified before the deadline (the wrong edit: nothing better came) is submitted
    candidates = read_jsonl(inst / "candidates.jsonl")
    assert [c["status"] for c in candidates] == ["noop", "ok"]
    assert outcome["model_patch"] == candidates[1]["patch"] and outcome["chosen"] == candidates[1]["candidate_id"]
    assert outcome["chosen_by"] == "best_so_far"  # the choice itself (and its grading) was cut
    assert (inst / "patch.diff").read_text() == outcome["model_patch"]
    assert (inst / "checkpoints.db").is_file()
    assert read_jsonl(out / "preds.jsonl")[0]["model_patch"] == outcome["model_patch"]
    events = read_jsonl(out / "events.jsonl")
    assert any(e["kind"] == "budget.exceeded" and e["data"]["kind"] == "wall_seconds" for e in events)
    assert [e["data"]["status"] for e in events if e["kind"] == "repair.end"] == ["limits_exceeded:wall_seconds"]
