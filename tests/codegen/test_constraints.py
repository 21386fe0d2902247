"""The constraint agent keeps only requirements the task states: what a small model adds of its own (an
example's items, invented demands) is dropped, and the run's events say what was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentflow.cli.main import run
from agentflow.reasoning.constraints import grounded
from tests.codegen.conftest import cassette, result_of

TASK = "Start with 'Hello!' and introduce yourself in under 30 words without using the word 'AI'."


def decompose(tmp_path: Path, capsys: pytest.CaptureFixture[str], task: str, answer: str) -> dict:
    """A one-node workflow (the constraint agent) run on `task`, the model answering `answer`."""
    model = cassette(tmp_path / "c.json", [answer])
    spec = tmp_path / "decompose.yaml"
    spec.write_text("name: decompose\nstate:\n  prompt: {type: str}\n  constraints: {type: list}\n"
                    "nodes:\n  decompose: {type: reason.constraints, next: END}\n")
    assert run(["run", str(spec), "-m", f"replay:{model}", "-o", str(tmp_path / "runs"), "--json",
                "-i", json.dumps({"prompt": task})]) == 0
    return result_of(capsys.readouterr().out)


@pytest.mark.parametrize(("item", "kept"), [
    ("Start with 'Hello!'", True),
    ("Introduce yourself in under 30 words", True),
    ("without using the word 'AI'.", True),
    ("End with 'Farewell.'", False),                    # the worked example's, copied
    ("The answer must contain your name.", False),      # invented
    ("3.", False),                                      # nothing to check
])
def test_grounded(item: str, kept: bool) -> None:
    assert grounded(item, TASK) is kept


def test_the_constraints_node_drops_what_the_task_does_not_say(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    answer = ("1. Start with 'Hello!'\n2. Introduce yourself in under 30 words\n"
              "3. without using the word 'AI'.\n4. End with 'Farewell.'")
    done = decompose(tmp_path, capsys, TASK, answer)
    assert done["state"]["constraints"] == ["Start with 'Hello!'", "Introduce yourself in under 30 words",
                                            "without using the word 'AI'."]
    events = [json.loads(line) for line in (Path(done["run_dir"]) / "events.jsonl").read_text().splitlines()]
    assert [e["data"]["dropped"] for e in events if e["kind"] == "reason.constraints_dropped"] == [["End with 'Farewell.'"]]


def test_an_answer_instead_of_a_list_falls_back_to_the_tasks_sentences(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    task = "List exactly 3 benefits of drinking water as bullet points starting with '- '. Do not use any commas."
    done = decompose(tmp_path, capsys, task, "1. - Benefits of drinking water\n2. - Improve physical performance")
    assert done["state"]["constraints"] == [
        "List exactly 3 benefits of drinking water as bullet points starting with '- '.", "Do not use any commas."]
    events = [json.loads(line) for line in (Path(done["run_dir"]) / "events.jsonl").read_text().splitlines()]
    assert [e["data"]["covered"] for e in events if e["kind"] == "reason.constraints_fallback"] == [0.23]  # 3 of 13
