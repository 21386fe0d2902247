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
    "PASS",  # nothing countable or quoted: judged, without asking for a check
    "- It keeps you hydrated and alert\n- It helps digestion\n- It is good for your skin",
    "PASS",
]


@pytest.mark.docker
def test_decrim_critic_checks_by_code_and_refines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    item = next(i for i in load_instructions() if i.id == "if-02")  # 3 bullets, no commas
    model = cassette(tmp_path / "decrim.json", REPLIES)
    code = run(["run", "decrim", "-m", f"replay:{model}", "--sandbox", BACKEND, "-c", "trace.content=true",
                "-c", "nodes.refine.n=1", "-c", "nodes.refinement.code_fix=false", "-o", str(tmp_path / "runs"),
                "--json", "-i", json.dumps({"prompt": item.prompt})])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    done = result_of(out)
    state = done["state"]
    assert done["status"] == "done" and state["all_pass"] is True and state["rounds"] == 1
    assert [c["how"] for c in state["critique"]] == ["code", "code", "model"]
    calls = asks(done["run_dir"])
    assert [c["purpose"] for c in calls] == ["constraints", "respond", "check", "check", "judge", "refine", "judge"]
    # round 1: the comma check, run in the sandbox on the first answer, failed; the refine prompt names it
    refine = calls[5]["prompt"]
    assert "- No commas." in refine and "returned False" in refine and "Exactly 3 bullet" not in refine
    # the checks were asked for without the answer (shown it, the critic fitted a check to it)
    assert all(calls[1]["answer"] not in c["prompt"] for c in calls[2:4]) and calls[1]["answer"] in calls[4]["prompt"]
    # round 2: both code checks were reused: only the model's verdict on the third cost a call
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
# the constraint agent copies the task's requirements word for word
CONSTRAINTS = "1. List exactly 3 benefits of drinking water as bullet points starting with '- '.\n2. Do not use any commas."
FIRST = "- It keeps you hydrated, alert\n- It helps digestion\n- It is good for your skin"
WORSE = "- It keeps you hydrated, alert, fresh\n- It helps digestion, too"
MENDED = "- It keeps you hydrated\n- It helps digestion\n- It is good for your skin"


def _decrim(tmp_path: Path, capsys: pytest.CaptureFixture[str], replies: list[str], *config: str, **inputs: object) -> dict:
    item = next(i for i in load_instructions() if i.id == "if-02")
    model = cassette(tmp_path / "decrim.json", replies)
    code = run(["run", "decrim", "-m", f"replay:{model}", "--sandbox", BACKEND, "-c", "trace.content=true", *config,
                "-o", str(tmp_path / "runs"), "--json", "-i", json.dumps({"prompt": item.prompt, **inputs})])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    return result_of(out)


def _events_of(done: dict, kind: str) -> list[dict]:
    lines = (Path(done["run_dir"]) / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["kind"] == kind]


def _events(done: dict, kind: str) -> list[dict]:
    return [e["data"] for e in _events_of(done, kind)]


@pytest.mark.docker
def test_decrim_refinements_are_sampled_and_the_critic_keeps_the_best(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = _decrim(tmp_path, capsys, [CONSTRAINTS,
                                      FIRST, COUNT_BULLETS, COUNT_COMMAS, WORSE, MENDED, FIRST],
                   "-c", "nodes.refinement.code_fix=false")
    state = done["state"]
    assert done["status"] == "done" and state["all_pass"] is True and state["response"] == MENDED
    calls = asks(done["run_dir"])
    # three refinements of one round; the checks written in round one judge them without a model call
    assert [c["purpose"] for c in calls] == ["constraints", "respond", "check", "check", "refine", "refine", "refine"]
    refine = calls[4]["prompt"]
    # the failed check's own words (with its count), computed in the sandbox, reach the refiner; the first
    # answer itself does not (shown it, a small model gives it back)
    assert "- Do not use any commas. (1 commas, none allowed)" in refine and FIRST not in refine
    assert calls[5]["prompt"] == refine == calls[6]["prompt"]  # samples of one prompt
    assert [e["answers"] for e in _events(done, "instruct.critic")] == [[1], [0, 2, 1]]


TIE = "- It keeps you hydrated\n- It helps digestion"  # mends the commas, breaks the count: as good, not better


@pytest.mark.docker
def test_decrim_keeps_its_answer_when_no_refinement_is_better(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = _decrim(tmp_path, capsys, [CONSTRAINTS,
                                      FIRST, COUNT_BULLETS, COUNT_COMMAS, WORSE, TIE],
                   "-c", "nodes.refine.n=2", "-c", "nodes.refinement.show_previous=true",
                   "-c", "nodes.refinement.code_fix=false", max_rounds=1)
    state = done["state"]
    assert state["rounds"] == 1 and state["all_pass"] is False
    assert state["response"] == FIRST  # neither the worse refinement nor the one the critic cannot tell apart
    assert [c["ok"] for c in state["critique"]] == [True, False]
    assert [e["answers"] for e in _events(done, "instruct.critic")] == [[1], [0, 1]]
    assert _events(done, "instruct.revert") == [{"passed": 1, "best": 1}]
    calls = asks(done["run_dir"])
    assert FIRST in calls[4]["prompt"]  # show_previous: the paper's form
    # the worked examples are earlier turns, not part of the question (a small model copied them from there)
    assert "Farewell" not in calls[0]["prompt"] and "fewer than 9 allowed" not in calls[2]["prompt"]


@pytest.mark.parametrize(("constraint", "by_code"), [
    ("in at least 30 and at most 70 words", True), ("Use the word 'mirror'.", True),
    ("Do not use any exclamation marks.", True), ("Write it in lowercase only", True),
    ("Output only the JSON.", True), ("End with Goodbye", True),
    ("Explain recursion", False), ("to a child", False), ("Describe how a bicycle gear works", False)])
def test_only_a_constraint_with_something_countable_or_quoted_gets_a_check(constraint: str, by_code: bool) -> None:
    from agentflow.instruct.nodes import checkable

    assert checkable(constraint) is by_code


FIX_COMMAS = "```python\ndef fix(response: str) -> str:\n    return response.replace(',', '')\n```"


@pytest.mark.docker
def test_decrim_code_fix_edits_the_answer_in_the_sandbox_and_the_critic_takes_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The model writes `fix(response)`; run in the sandbox on the best answer, its result is one more refinement,
    judged by the critic's checks like the sampled ones (no model call for them)."""
    done = _decrim(tmp_path, capsys, [CONSTRAINTS, FIRST, COUNT_BULLETS, COUNT_COMMAS, WORSE, FIX_COMMAS],
                   "-c", "nodes.refine.n=1")
    state = done["state"]
    assert done["status"] == "done" and state["all_pass"] is True and state["rounds"] == 1
    assert state["response"] == FIRST.replace(",", "")
    calls = asks(done["run_dir"])
    assert [c["purpose"] for c in calls] == ["constraints", "respond", "check", "check", "refine", "fix"]
    fix = calls[5]["prompt"]
    # the fix is asked of the answer itself, with the failed check's own words
    assert FIRST in fix and "- Do not use any commas. (1 commas, none allowed)" in fix
    assert "Goodbye." not in fix  # the worked examples are earlier turns
    assert [e["answers"] for e in _events(done, "instruct.critic")] == [[1], [0, 2]]
    # written by the search's last branch (the only one here)
    assert _events(done, "instruct.fix") == [{"search": "refine", "branch": "b0", "ok": True, "chars": len(FIRST) - 1}]
    item = next(i for i in load_instructions() if i.id == "if-02")
    assert item.grade(state["response"])["all"] is True  # the benchmark's own checkers agree


@pytest.mark.docker
def test_a_fix_that_returns_no_text_is_said_and_adds_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "fix-ran-here"
    escape = (f"```python\ndef fix(response: str) -> str:\n    try:\n        open({str(marker)!r}, 'w').write('x')\n"
              "    except OSError:\n        pass\n```")
    done = _decrim(tmp_path, capsys, [CONSTRAINTS, FIRST, COUNT_BULLETS, COUNT_COMMAS, WORSE, escape],
                   "-c", "nodes.refine.n=1", max_rounds=1)
    state = done["state"]
    assert state["all_pass"] is False and state["response"] == FIRST
    [event] = _events(done, "instruct.fix")
    # said in the run's events
    assert event == {"search": "refine", "branch": "b0", "ok": False, "error": "fix returned None, not text"}
    assert [e["answers"] for e in _events(done, "instruct.critic")] == [[1], [0]]  # only the sampled refinement
    assert not marker.exists()  # the model's code ran in the sandbox, not on this machine


JSON_CHECK = ("```python\nimport json\n\ndef check(response: str):\n    data = json.loads(response)\n"
              "    return all(k in data for k in ('capital', 'population', 'currency'))\n```")
BUGGY_CHECK = "```python\ndef check(response: str):\n    return undefined_name in response\n```"


@pytest.mark.docker
def test_a_check_that_cannot_parse_the_response_fails_it_and_says_where(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A check raising JSONDecodeError on the answer is the answer's fault (the constraint fails, the error is
    the reason); a check raising NameError is the check's own, and the model judges that constraint."""
    item = next(i for i in load_instructions() if i.id == "if-04")
    constraints = ("1. Give the capital, population and currency of Japan as a JSON object with the keys \"capital\", "
                   "\"population\" and \"currency\".\n2. Output only the JSON.")
    model = cassette(tmp_path / "d.json", [constraints, '{"capital": "Tokyo", "population": 126,000,000}',
                                           JSON_CHECK, BUGGY_CHECK, "PASS"])
    spec = tmp_path / "critique.yaml"
    spec.write_text("name: critique\nstate:\n  prompt: {type: str}\n  constraints: {type: list}\n  response: {type: str}\n"
                    "  critique: {type: list}\n  checks: {type: dict}\n  best: {type: dict}\n  refinements: {type: list}\n"
                    "  all_pass: {type: bool, default: false}\nnodes:\n  decompose: {type: reason.constraints, next: respond}\n"
                    "  respond: {type: instruct.respond, next: critique}\n  critique: {type: instruct.critic, next: END}\n")
    assert run(["run", str(spec), "-m", f"replay:{model}", "--sandbox", BACKEND, "-o", str(tmp_path / "runs"), "--json",
                "-i", json.dumps({"prompt": item.prompt})]) == 0
    state = result_of(capsys.readouterr().out)["state"]
    parse, only = state["critique"]
    assert parse["ok"] is False and parse["how"] == "code"
    assert parse["why"].startswith("the response does not parse: json.decoder.JSONDecodeError: Expecting")
    assert only == {"constraint": "Output only the JSON.", "ok": True, "how": "model", "why": ""}
    assert state["checks"]["Output only the JSON."] is None  # not kept: the next round asks afresh


@pytest.mark.docker
def test_each_refinement_is_a_branch_of_the_refine_search_and_the_last_writes_the_fix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = _decrim(tmp_path, capsys, [CONSTRAINTS, FIRST, COUNT_BULLETS, COUNT_COMMAS, WORSE, MENDED, FIX_COMMAS],
                   "-c", "nodes.refine.n=2")
    state = done["state"]
    assert state["all_pass"] is True and state["rounds"] == 1 and state["response"] == MENDED
    # each refinement ran in a branch of its own (its thread, its events); the last branch also wrote the fix
    assert [(e["node_id"], e["data"]["event"]) for e in _events_of(done, "search.branch")] == [
        ("refine/b0", "start"), ("refine/b0", "end"), ("refine/b1", "start"), ("refine/b1", "end")]
    asked = [(e["purpose"], e.get("branch")) for e in _events(done, "model.ask")]
    assert asked == [("constraints", None), ("respond", None), ("check", None), ("check", None),
                     ("refine", "b0"), ("refine", "b1"), ("fix", "b1")]
    # the critic judges the gathered refinements in branch order, the fix last; the first of the best is kept
    assert [e["answers"] for e in _events(done, "instruct.critic")] == [[1], [0, 2, 2]]
