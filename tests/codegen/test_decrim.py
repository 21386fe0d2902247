"""The shipped decrim workflow, end to end with replayed model answers and a real sandbox: the critic checks the
code-checkable constraints with functions it writes, run in the sandbox, judges the other one itself, names the
failed constraint in the refine prompt, and the refined answer passes the benchmark's own checkers (which the
workflow never sees). A check function, once written, is reused in the next round without a model call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentflow.cli.main import run
from agentflow.instruct.dataset import load_instructions
from tests.codegen.conftest import BACKEND, asks, cassette, result_of

BULLETS = "```python\ndef check(response: str) -> bool:\n    return sum(1 for l in response.splitlines() if l.startswith('- ')) == 3\n```"
NO_COMMAS = "```python\ndef check(response: str) -> bool:\n    return ',' not in response\n```"
REPLIES = [
    "1. Exactly 3 bullet points starting with '- '.\n2. No commas.\n3. The points are benefits of drinking water.",
    "- It keeps you hydrated, alert and fresh\n- It helps digestion\n- It is good for your skin",
    BULLETS,
    NO_COMMAS,
    "PASS",
    "- It keeps you hydrated and alert\n- It helps digestion\n- It is good for your skin",
    "PASS",
]


@pytest.mark.docker
def test_decrim_critic_checks_by_code_and_refines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    item = next(i for i in load_instructions() if i.id == "if-02")  # 3 bullets, no commas
    model = cassette(tmp_path / "decrim.json", REPLIES)
    code = run(["run", "decrim", "-m", f"replay:{model}", "--sandbox", BACKEND, "-c", "trace.content=true", "-o", str(tmp_path / "runs"),
                "--json", "-i", json.dumps({"prompt": item.prompt})])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    done = result_of(out)
    state = done["state"]
    assert done["status"] == "done" and state["all_pass"] is True and state["rounds"] == 1
    assert [c["how"] for c in state["critique"]] == ["code", "code", "model"]
    calls = asks(done["run_dir"])
    assert [c["purpose"] for c in calls] == ["constraints", "respond", "critic", "critic", "critic", "refine", "critic"]
    # round 1: the comma check, run in the sandbox on the first answer, failed; the refine prompt names it
    refine = calls[5]["prompt"]
    assert "- No commas." in refine and "returned False" in refine and "Exactly 3 bullet" not in refine
    # round 2: both code checks were reused (only the model-judged constraint cost a call) and passed
    assert calls[6]["prompt"].startswith("Constraint: The points are benefits")
    # the benchmark's own checkers, never shown to the workflow, agree: before failed, after passes
    assert item.grade(calls[1]["answer"])["all"] is False
    assert item.grade(state["response"]) == {"all": True, "checks": [
        {"kind": "bullets", "ok": True, "why": "3 bullet points (exactly 3)"},
        {"kind": "forbidden_chars", "ok": True, "why": "none present"}]}


COUNT_BULLETS = ("```python\ndef check(response: str):\n    n = sum(1 for l in response.splitlines() if l.startswith('- '))\n"
                 "    return True if n == 3 else f'{n} bullet points, 3 required'\n```")
COUNT_COMMAS = ("```python\ndef check(response: str):\n    k = response.count(',')\n"
                "    return True if k == 0 else f'{k} commas, none allowed'\n```")
FIRST = "- It keeps you hydrated, alert\n- It helps digestion\n- It is good for your skin"
WORSE = "- It keeps you hydrated, alert, fresh\n- It helps digestion, too"
MENDED = "- It keeps you hydrated\n- It helps digestion\n- It is good for your skin"


def _decrim(tmp_path: Path, capsys: pytest.CaptureFixture[str], replies: list[str], **inputs: object) -> dict:
    item = next(i for i in load_instructions() if i.id == "if-02")
    model = cassette(tmp_path / "decrim.json", replies)
    code = run(["run", "decrim", "-m", f"replay:{model}", "--sandbox", BACKEND, "-c", "trace.content=true",
                "-o", str(tmp_path / "runs"), "--json", "-i", json.dumps({"prompt": item.prompt, **inputs})])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    return result_of(out)


@pytest.mark.docker
def test_decrim_feeds_the_checks_own_account_and_undoes_a_worse_refinement(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = _decrim(tmp_path, capsys, ["1. Exactly 3 bullet points starting with '- '.\n2. No commas.",
                                      FIRST, COUNT_BULLETS, COUNT_COMMAS, WORSE, MENDED])
    state = done["state"]
    assert done["status"] == "done" and state["all_pass"] is True and state["response"] == MENDED
    calls = asks(done["run_dir"])
    assert [c["purpose"] for c in calls] == ["constraints", "respond", "critic", "critic", "refine", "refine"]
    # the failed check's own words (with its count), computed in the sandbox, reach the refiner
    assert "- No commas. (1 commas, none allowed)" in calls[4]["prompt"]
    # the first refinement broke both checks (2 bullets, 3 commas): undone, so the second starts from the first
    # answer and its critique again, not from the worse one
    assert FIRST in calls[5]["prompt"] and WORSE not in calls[5]["prompt"]
    assert "(1 commas, none allowed)" in calls[5]["prompt"]
    events = [json.loads(line) for line in (Path(done["run_dir"]) / "events.jsonl").read_text().splitlines()]
    assert [e["data"] for e in events if e["kind"] == "instruct.revert"] == [{"passed": 0, "best": 1}]


@pytest.mark.docker
def test_decrim_ends_with_the_best_answer_when_the_rounds_run_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = _decrim(tmp_path, capsys, ["1. Exactly 3 bullet points starting with '- '.\n2. No commas.",
                                      FIRST, COUNT_BULLETS, COUNT_COMMAS, WORSE], max_rounds=1)
    state = done["state"]
    assert state["rounds"] == 1 and state["all_pass"] is False
    assert state["response"] == FIRST  # not the last (worse) refinement
    assert [c["ok"] for c in state["critique"]] == [True, False]
