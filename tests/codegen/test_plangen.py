"""The shipped plangen workflow, end to end with replayed model answers and a real sandbox: the selection agent's
UCB choice (not the model's prior) is the strategy the graph search runs over plan / verify / write / score
nodes, the verification agent values the plans, the candidates' rewards come from the prompt's examples run in
the sandbox, the first candidate passing every example ends the search, and its reward updates the statistics."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agentflow.cli.main import run
from agentflow.reasoning.llm import SamplingSettings, sampling
from agentflow.reasoning.ucb import UcbStats, choose_algorithm
from tests.codegen.conftest import BACKEND, asks, cassette, result_of

PROMPT = 'def add(a, b):\n    """Return the sum of a and b.\n    >>> add(1, 2)\n    3\n    >>> add(2, 2)\n    4\n    """\n'
UCB = {"arms": {"best_of_n": {"n": 2, "total": 0.4}, "tree_of_thought": {"n": 1, "total": 0.9},
                "rebase": {"n": 2, "total": 1.0}}}
REPLIES = [
    "1. Return the sum of a and b.",                       # constraint agent
    "A",                                                   # the model's prior: best-of-N
    "1. Subtract b from a.", "Score: 2",                   # tree of thought, step 1: three plans, each scored
    "1. Add a and b.", "Score: 9",
    "1. Multiply a by b.", "Score: 1",
    "```python\ndef add(a, b):\n    return a - b\n```", "Score: 8",   # best plan's code: fails the examples
    "```python\ndef add(a, b):\n    return a + b\n```", "Score: 5",   # second plan's code: passes them
]


def _events(run_dir: str, kind: str) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in (Path(run_dir) / "events.jsonl").read_text().splitlines()]
    return [e["data"] for e in events if e.get("kind") == kind]


def _plangen(tmp_path: Path, capsys: pytest.CaptureFixture[str], replies: list[str], **inputs: Any) -> dict[str, Any]:
    model = cassette(tmp_path / "plangen.json", replies)
    code = run(["run", "plangen", "-m", f"replay:{model}", "--sandbox", BACKEND, "-c", "trace.content=true",
                "-o", str(tmp_path / "runs"), "--json", "-i", json.dumps(inputs)])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    return result_of(out)


@pytest.mark.docker
def test_plangen_runs_the_ucb_choice_and_updates_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = _plangen(tmp_path, capsys, REPLIES, prompt=PROMPT, kind="code", ucb=UCB)
    state = done["state"]
    # UCB: tree_of_thought 0.9 + sqrt(2 ln 5 / 1) beats best_of_n's 0.2 + sqrt(2 ln 5 / 2) + 0.2 prior
    assert state["selection"]["prior"] == "best_of_n" and state["algorithm"] == "tree_of_thought"
    assert state["selection"]["scores"]["tree_of_thought"] == pytest.approx(0.9 + math.sqrt(2 * math.log(5)), abs=1e-3)
    calls = asks(done["run_dir"])
    assert [c["purpose"] for c in calls] == ["constraints", "select"] + ["plan", "verify"] * 3 + ["write code", "verify"] * 2
    # the search ran tree-of-thought as a beam: three plans (step 1), valued by the verification agent; then
    # the kept plans continued best first, each in a branch forked from its plan's checkpoint
    report = state["search"]
    assert report["strategy"] == "beam"
    parents = {b["id"]: b["parent"] for b in report["branches"]}
    assert parents == {"b0": "root", "b1": "root", "b2": "root", "b3": "b1", "b4": "b0"}
    assert "1. Add a and b." in calls[8]["prompt"] and "1. Subtract b from a." in calls[10]["prompt"]
    assert "1. Return the sum of a and b." in calls[3]["prompt"]
    # rewards: the sandbox ran the examples (0 of 2: the verifier's score blends in; 2 of 2: solved, reward 1
    # whatever the verifier said, and the search ends before the third plan's continuation)
    rewards = [{k: r[k] for k in ("branch", "examples", "verifier", "reward")} for r in _events(done["run_dir"], "codegen.reward")]
    assert rewards == [{"branch": "b3", "examples": 0.0, "verifier": 0.8, "reward": 0.16},
                       {"branch": "b4", "examples": 1.0, "verifier": 0.5, "reward": 1.0}]
    assert report["stopped_at"] == "b4" and report["chosen"] == "b4" and report["value"] == 1.0
    assert state["score"] == {"score": 1.0, "examples": 1.0, "verifier": 0.5}
    assert "a + b" in state["code"] and state["plan"] == "1. Subtract b from a." and state["reward"] == pytest.approx(1.0)
    arms = state["ucb"]["arms"]
    assert arms["tree_of_thought"] == {"n": 2, "total": pytest.approx(1.9)}
    assert arms["best_of_n"] == UCB["arms"]["best_of_n"] and arms["rebase"] == UCB["arms"]["rebase"]
    # every step is a graph node of its branch
    ran = {(e["branch"], e.get("type")) for e in _events(done["run_dir"], "node.end") if e.get("search") == "solve_code"}
    assert {("b1", "codegen.plan"), ("b1", "reason.verify"), ("b4", "codegen.write"), ("b4", "codegen.test"),
            ("b4", "codegen.reward")} <= ran


REBASE_UCB = {"arms": {"best_of_n": {"n": 3, "total": 0.0}, "tree_of_thought": {"n": 3, "total": 0.0},
                       "rebase": {"n": 3, "total": 1.5}}}


@pytest.mark.docker
def test_rebase_spends_the_second_step_on_the_best_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    replies = [
        "1. Return the sum of a and b.", "C",
        "1. Add a and b.", "Score: 9", "1. Subtract b from a.", "Score: 2", "1. Multiply a by b.", "Score: 1",
        # softmax(score / 0.2) gives all three continuations to the best plan: a greedy one, then samples
        "```python\ndef add(a, b):\n    return b - a + 0\n```", "Score: 3",
        "```python\ndef add(a, b):\n    return a + b\n```", "Score: 6",
    ]
    done = _plangen(tmp_path, capsys, replies, prompt=PROMPT, kind="code", ucb=REBASE_UCB)
    state = done["state"]
    assert state["algorithm"] == "rebase" and state["search"]["strategy"] == "rebase"
    parents = {b["id"]: b["parent"] for b in state["search"]["branches"]}
    assert parents == {"b0": "root", "b1": "root", "b2": "root", "b3": "b0", "b4": "b0"}
    assert [c["purpose"] for c in asks(done["run_dir"])][-4:] == ["write code", "verify"] * 2
    assert state["search"]["stopped_at"] == "b4" and "a + b" in state["code"]
    assert state["ucb"]["arms"]["rebase"] == {"n": 4, "total": pytest.approx(2.5)}


def test_sibling_branches_sample_and_the_first_stays_greedy() -> None:
    def at(sample: int | None) -> tuple[float, int | None]:
        return sampling(SimpleNamespace(run=SimpleNamespace(sample=sample)),
                        SamplingSettings(temperature=0.0, sample_temperature=0.8))

    assert at(None) == (0.0, None)  # the main line
    assert at(0) == (0.0, 0)        # a parent's first child: greedy
    assert at(1) == (0.8, 1) and at(2) == (0.8, 2)
    assert sampling(SimpleNamespace(run=SimpleNamespace(sample=2)), SamplingSettings(temperature=0.3)) == (0.3, 2)


def test_ucb_tries_every_algorithm_first_then_exploits() -> None:
    algs = ["best_of_n", "tree_of_thought", "rebase"]
    stats = UcbStats()
    assert choose_algorithm(stats, algs, prior="rebase") == "rebase"  # untried: the model's pick among them
    stats = stats.update("rebase", 0.1).update("best_of_n", 1.0)
    assert choose_algorithm(stats, algs) == "tree_of_thought"
    stats = stats.update("tree_of_thought", 0.0)
    for _ in range(20):  # the arm that keeps earning wins once exploration has shrunk
        stats = stats.update("best_of_n", 1.0)
    assert choose_algorithm(stats, algs, c=0.2) == "best_of_n"
    assert choose_algorithm(stats, algs, c=1.0) == "rebase"  # a large c still explores the one-try arm


TEXT_UCB = {"arms": {"best_of_n": {"n": 2, "total": 2.0}, "tree_of_thought": {"n": 2, "total": 0.0},
                     "rebase": {"n": 2, "total": 0.0}}}


@pytest.mark.docker
def test_plangen_scores_text_by_each_constraint_checked_in_the_sandbox(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a text task a check function for each constraint is written once, before the search (from the
    constraint alone), and every branch's answer is judged by the same checks in the sandbox: an answer's
    reward is the share of constraints that hold (a full score ends best-of-N)."""
    from agentflow.instruct.dataset import load_instructions
    from tests.codegen.test_decrim import CONSTRAINTS, COUNT_BULLETS, COUNT_COMMAS, FIRST, MENDED

    item = next(i for i in load_instructions() if i.id == "if-02")
    done = _plangen(tmp_path, capsys, [CONSTRAINTS, "A", COUNT_BULLETS, COUNT_COMMAS, FIRST, MENDED],
                    prompt=item.prompt, ucb=TEXT_UCB)
    state = done["state"]
    assert state["algorithm"] == "best_of_n" and state["search"]["strategy"] == "best_of_n"
    calls = asks(done["run_dir"])
    # the checks come first; the second answer is judged by them as the first was: no model call
    assert [c["purpose"] for c in calls] == ["constraints", "select", "check", "check", "respond", "respond"]
    scores = [{k: s[k] for k in ("branch", "reward", "failed")} for s in _events(done["run_dir"], "instruct.score")]
    assert scores == [{"branch": "b0", "reward": 0.5, "failed": ["Do not use any commas."]},
                      {"branch": "b1", "reward": 1.0, "failed": []}]
    assert state["search"]["stopped_at"] == "b1" and len(state["search"]["branches"]) == 2
    assert state["response"] == MENDED and state["reward"] == pytest.approx(1.0)
    assert state["ucb"]["arms"]["best_of_n"] == {"n": 3, "total": pytest.approx(3.0)}
    assert item.grade(FIRST)["all"] is False and item.grade(state["response"])["all"] is True
