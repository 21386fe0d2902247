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
