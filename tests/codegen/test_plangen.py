"""The shipped plangen workflow, end to end with replayed model answers and a real sandbox: the selection agent's
UCB choice (not the model's prior) is the algorithm that runs, the verification agent scores the plans, the
candidates' rewards come from the prompt's examples run in the sandbox, and the reward updates the statistics."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from agentflow.cli.main import run
from agentflow.reasoning.algorithms import share_out
from agentflow.reasoning.ucb import UcbStats, choose_algorithm
from tests.codegen.conftest import BACKEND, asks, cassette, result_of

PROMPT = 'def add(a, b):\n    """Return the sum of a and b.\n    >>> add(1, 2)\n    3\n    >>> add(2, 2)\n    4\n    """\n'
UCB = {"arms": {"best_of_n": {"n": 2, "total": 0.4}, "tree_of_thought": {"n": 1, "total": 0.9},
                "rebase": {"n": 2, "total": 1.0}}}
REPLIES = [
    "1. Return the sum of a and b.",                       # constraint agent
    "A",                                                   # the model's prior: best-of-N
    "1. Subtract b from a.", "Score: 2",                   # tree of thought: three first thoughts, each scored
    "1. Add a and b.", "Score: 9",
    "1. Multiply a by b.", "Score: 1",
    "```python\ndef add(a, b):\n    return a - b\n```", "Score: 8",   # best plan's code: fails the examples
    "```python\ndef add(a, b):\n    return a + b\n```", "Score: 5",   # second plan's code: passes them
]


@pytest.mark.docker
def test_plangen_runs_the_ucb_choice_and_updates_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = cassette(tmp_path / "plangen.json", REPLIES)
    code = run(["run", "plangen", "-m", f"replay:{model}", "--sandbox", BACKEND, "-c", "trace.content=true", "-o", str(tmp_path / "runs"),
                "--json", "-i", json.dumps({"prompt": PROMPT, "kind": "code", "ucb": UCB})])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    done = result_of(out)
    state = done["state"]
    # UCB: tree_of_thought 0.9 + sqrt(2 ln 5 / 1) beats best_of_n's 0.2 + sqrt(2 ln 5 / 2) + 0.2 prior
    assert state["selection"]["prior"] == "best_of_n" and state["algorithm"] == "tree_of_thought"
    assert state["selection"]["scores"]["tree_of_thought"] == pytest.approx(0.9 + math.sqrt(2 * math.log(5)), abs=1e-3)
    calls = asks(done["run_dir"])
    assert [c["purpose"] for c in calls] == ["constraints", "select"] + ["plan", "verify"] * 3 + ["write code", "verify"] * 2
    # the two best-scored plans were completed, best first; the constraints reached the verifier
    assert "1. Add a and b." in calls[8]["prompt"] and "1. Subtract b from a." in calls[10]["prompt"]
    assert "1. Return the sum of a and b." in calls[3]["prompt"]
    # rewards: the sandbox ran the examples (0 of 2: the verifier's score blends in; 2 of 2: solved, reward 1
    # whatever the verifier said, and the search ends)
    assert state["candidates"] == [{"examples": 0.0, "verifier": 0.8, "reward": 0.16},
                                   {"examples": 1.0, "verifier": 0.5, "reward": 1.0}]
    assert "a + b" in state["code"] and state["reward"] == pytest.approx(1.0)
    arms = state["ucb"]["arms"]
    assert arms["tree_of_thought"] == {"n": 2, "total": pytest.approx(1.9)}
    assert arms["best_of_n"] == UCB["arms"]["best_of_n"] and arms["rebase"] == UCB["arms"]["rebase"]


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


def test_rebase_shares_expansions_by_reward() -> None:
    assert share_out([0.9, 0.1, 0.1], 3, temperature=0.2) == [3, 0, 0]
    assert share_out([0.5, 0.5, 0.5], 3) == [1, 1, 1]
    assert sum(share_out([0.7, 0.6, 0.2], 5)) == 5


TEXT_UCB = {"arms": {"best_of_n": {"n": 2, "total": 2.0}, "tree_of_thought": {"n": 2, "total": 0.0},
                     "rebase": {"n": 2, "total": 0.0}}}


@pytest.mark.docker
def test_plangen_scores_text_by_each_constraint_checked_in_the_sandbox(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a text task the verification agent checks each constraint as decrim's critic does: a check function
    it writes runs in the sandbox, is reused for the next candidate, and an answer's reward is the share of
    constraints that hold (a full score ends best-of-N)."""
    from agentflow.instruct.dataset import load_instructions
    from tests.codegen.test_decrim import CONSTRAINTS, COUNT_BULLETS, COUNT_COMMAS, FIRST, MENDED

    item = next(i for i in load_instructions() if i.id == "if-02")
    model = cassette(tmp_path / "plangen.json", [CONSTRAINTS, "A", FIRST, COUNT_BULLETS, COUNT_COMMAS, MENDED])
    code = run(["run", "plangen", "-m", f"replay:{model}", "--sandbox", BACKEND, "-c", "trace.content=true",
                "-o", str(tmp_path / "runs"), "--json", "-i", json.dumps({"prompt": item.prompt, "ucb": TEXT_UCB})])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    done = result_of(out)
    state = done["state"]
    assert state["algorithm"] == "best_of_n"
    calls = asks(done["run_dir"])
    # the second answer is judged by the two checks written for the first: no model call
    assert [c["purpose"] for c in calls] == ["constraints", "select", "respond", "check", "check", "respond"]
    assert state["candidates"] == [{"reward": 0.5, "failed": ["Do not use any commas."]},
                                   {"reward": 1.0, "failed": []}]
    assert state["response"] == MENDED and state["reward"] == pytest.approx(1.0)
    assert state["ucb"]["arms"]["best_of_n"] == {"n": 3, "total": pytest.approx(3.0)}
    assert item.grade(FIRST)["all"] is False and item.grade(state["response"])["all"] is True
