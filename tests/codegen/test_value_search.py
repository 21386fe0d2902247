"""Mechanisms combine on the graph's search: SWE-Search's value agent (`reason.value`) values the branches of
an MCTS over codegen's own nodes (write -> test -> value), from YAML, replayed answers, code run in a real
sandbox. UCT expands the branch the value agent rated higher, whose next attempt passes."""

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

WORKFLOW = {
    "name": "codegen_value_search",
    "state": {"prompt": {"type": "str"}, "entry_point": {"type": "str"}, "code": {"type": "str"},
              "tests": {"type": "dict"}, "value": {"type": "dict"}, "search": {"type": "dict"}},
    "nodes": {"solve": {
        "search": {"strategy": "mcts", "n": 3, "expand": 2, "concurrency": 1, "value": "value.value",
                   "step_until": ["value"]},
        "output": "search", "next": "END",
        "subgraph": {"name": "attempt", "nodes": {
            "write": {"type": "codegen.write", "next": "test"},
            "test": {"type": "codegen.test", "next": "value"},
            "value": {"type": "reason.value", "settings": {"task": "prompt", "work": "code", "checks": "tests"},
                      "route": {"when": {"tests.ok == True": "END"}, "default": "write"}}}}}},
}

WRONG = "```python\ndef count_vowels(s: str) -> int:\n    return 0\n```"
CLOSE = "```python\ndef count_vowels(s: str) -> int:\n    return sum(1 for c in s if c in 'aeiou')\n```"
RIGHT = "```python\ndef count_vowels(s: str) -> int:\n    return sum(1 for c in s.lower() if c in 'aeiou')\n```"


@pytest.mark.docker
def test_the_value_agent_steers_an_mcts_over_codegen_nodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    replies = [
        WRONG, "Value: 5\nAssessment: counts nothing.",                       # b0 (from the root)
        CLOSE, "Value: 70\nAssessment: right idea; upper-case vowels are missed.",  # b1 (from the root)
        RIGHT, "Value: 95\nAssessment: handles both cases.",                  # b2: UCT expands b1, valued higher
    ]
    wf = tmp_path / "wf.yaml"
    wf.write_text(json.dumps(WORKFLOW))
    model = cassette(tmp_path / "c.json", replies)
    code = run(["run", str(wf), "-m", f"replay:{model}", "--sandbox", BACKEND, "-o", str(tmp_path / "runs"),
                "-c", "trace.content=true", "--json", "-i", json.dumps({"prompt": PROMPT, "entry_point": "count_vowels"})])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    result = result_of(out)
    report = result["state"]["search"]
    by_id = {b["id"]: b for b in report["branches"]}
    assert by_id["b0"]["value"] == pytest.approx(0.05) and by_id["b1"]["value"] == pytest.approx(0.70)
    assert by_id["b2"]["parent"] == "b1" and by_id["b2"]["terminal"] and report["chosen"] == "b2"
    assert result["state"]["tests"]["ok"] is True and "s.lower()" in result["state"]["code"]
    # the value agent saw each attempt's code and what running its examples showed
    values = [a for a in asks(result["run_dir"]) if a["purpose"] == "value"]
    assert len(values) == 3 and "return 0" in values[0]["prompt"] and "failures" in values[0]["prompt"]
