"""The shipped codesim workflow, end to end with replayed model answers and a real sandbox: a simulation that
disagrees with an example sends the plan back for revision (its trace in the revision prompt), the written code
fails an example when run in the sandbox, and the failing case's simulation drives a fix that passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentflow.cli.main import run
from tests.codegen.conftest import BACKEND, asks, cassette, result_of

PROMPT = '''def count_vowels(s: str) -> int:
    """Count the vowels (a, e, i, o, u, in either case) in s.
    >>> count_vowels("hello")
    2
    >>> count_vowels("AEIOU")
    5
    """
'''

REPLIES = [
    "1. Go through the characters of s.\n2. Count those in 'aeiou'.",
    ("hello: h,e,l,l,o -> e and o are in 'aeiou' -> 2 (expected 2).\n"
     "AEIOU: no character is in 'aeiou' -> 0 (expected 5).\nVERDICT: MISMATCH"),
    "1. Lower-case s.\n2. Count the characters of the result that are in 'aeiou'.",
    "hello -> 2 (expected 2). AEIOU -> aeiou -> 5 (expected 5).\nVERDICT: MATCH",
    "```python\ndef count_vowels(s: str) -> int:\n    return sum(1 for c in s if c in 'aeiou')\n```",
    "For 'AEIOU', c = 'A': 'A' in 'aeiou' is False, so nothing is counted: line 2 must lower-case c.",
    "```python\ndef count_vowels(s: str) -> int:\n    return sum(1 for c in s.lower() if c in 'aeiou')\n```",
]


@pytest.mark.docker
def test_codesim_revises_the_plan_and_debugs_by_simulation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = cassette(tmp_path / "codesim.json", REPLIES)
    code = run(["run", "codesim", "-m", f"replay:{model}", "--sandbox", BACKEND, "-c", "trace.content=true", "-o", str(tmp_path / "runs"),
                "--json", "-i", json.dumps({"prompt": PROMPT})])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    done = result_of(out)
    state = done["state"]
    assert done["status"] == "done"
    # the plan was revised once, after the simulation disagreed; the code was debugged once, then passed
    assert state["plan_rounds"] == 1 and state["plan"].startswith("1. Lower-case s.")
    assert state["debug_rounds"] == 1 and "s.lower()" in state["code"]
    assert state["tests"] == {"passed": 2, "total": 2, "all_passed": True, "failures": [], "ok": True}
    calls = asks(done["run_dir"])
    assert [c["purpose"] for c in calls] == ["plan", "simulate plan", "revise plan", "simulate plan", "write code",
                                             "simulate failing case", "debug"]
    # the simulation's disagreement is what the revision sees
    assert "AEIOU: no character is in 'aeiou' -> 0 (expected 5)" in calls[2]["prompt"]
    # the failure comes from running the first code in the sandbox, and both it and the trace reach the debugger
    failure = "count_vowels(\"AEIOU\"): expected 5, returned 0"
    assert failure in calls[5]["prompt"] and failure in calls[6]["prompt"]
    assert "line 2 must lower-case c" in calls[6]["prompt"]
    # the examples come from the docstring; the hidden side of a task is never in the state
    assert "check(" not in str(state) and all("check(" not in c["prompt"] for c in calls)
