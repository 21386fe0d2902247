"""The README's time travel, as written: `agentflow run --history THREAD` and `agentflow run --fork THREAD
--after plan --edit JSON` on a run of the shipped plan_code_critique whose model came from `-m` (issue #53,
item 1). History, fork and resume resolve the model, sandbox and workspace as `run` does: the command line,
else the run's own (verified) record; so each works with `-m` given again and without it. A search branch's
thread id, as the viewer shows it, is accepted by `--history`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentflow.cli.main import run

PLAN = {"goal": "fix add", "steps": [{"description": "return a + b", "files": ["calc.py"]}]}


def _cassette(path: Path, contents: list[str]) -> Path:
    replies = [{"response": {"choices": [{"message": {"role": "assistant", "content": c}, "finish_reason": "stop"}],
                             "usage": {"input_tokens": 10, "output_tokens": 5}, "model": "scripted"}}
               for c in contents]
    path.write_text(json.dumps({"version": 1, "match": "sequence", "interactions": replies}))
    return path


def _last(out: str) -> dict[str, Any]:
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture
def paused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """A run of plan_code_critique with its model from -m, paused at approve_plan: (runs folder, model spec)."""
    model = f"replay:{_cassette(tmp_path / 'plan.json', [json.dumps(PLAN)])}"
    runs = str(tmp_path / "runs")
    assert run(["run", "plan_code_critique", "-m", model, "--sandbox", "none", "-o", runs, "--thread-id", "t1",
                "--json", "-i", '{"task": "add() subtracts"}']) == 0
    assert _last(capsys.readouterr().out)["interrupt"]["node"] == "approve_plan"
    return runs, model


@pytest.mark.parametrize("with_model", [False, True], ids=["recorded-model", "-m-again"])
def test_history_of_a_run_whose_model_came_from_the_command_line(
    paused: tuple[str, str], with_model: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    runs, model = paused
    extra = ["-m", model] if with_model else []
    code = run(["run", "-o", runs, "--history", "t1", "--json", *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    points = [json.loads(line) for line in out.splitlines()]
    assert any("plan" in p["after"] for p in points), out
    assert points[-1]["next"] == ["approve_plan"], out


EDITS = {"README's": {"task": "add -v too"}, "a new plan": {"plan": {"goal": "fix add, edited", "steps": []}}}


@pytest.mark.parametrize("edit", list(EDITS))
@pytest.mark.parametrize("with_model", [False, True], ids=["recorded-model", "-m-again"])
def test_fork_after_plan_with_an_edit(paused: tuple[str, str], with_model: bool, edit: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    runs, model = paused
    extra = ["-m", model] if with_model else []
    code = run(["run", "-o", runs, "--fork", "t1", "--after", "plan", "--edit", json.dumps(EDITS[edit]), "--json",
                *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = _last(out)
    assert result["status"] == "interrupted" and result["interrupt"]["node"] == "approve_plan", out
    assert {k: result["state"][k] for k in EDITS[edit]} == EDITS[edit]
    # the fork's own record is the user's: it resumes with no flags at all
    assert run(["run", "-o", runs, "--history", result["thread_id"], "--json"]) == 0, capsys.readouterr().err


def test_a_branch_thread_id_is_accepted_by_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A search branch's checkpoints live in its root thread's run, written by the search node's subgraph:
    `--history THREAD~node~bN` (as the viewer shows it) lists them with the subgraph's nodes."""
    workflow = tmp_path / "search.yaml"
    workflow.write_text(json.dumps({
        "name": "s", "state": {"task": {"type": "str"}, "answer": {"type": "str"}, "score": {"type": "int"},
                               "steps": {"type": "list", "reducer": "append"}, "report": {"type": "dict"}},
        "nodes": {"go": {"search": {"n": 2, "value": "score"}, "output": "report", "next": "END",
                         "subgraph": {"name": "try", "nodes": {
                             "attempt": {"fn": "tests.graph.search_nodes:attempt", "next": "refine"},
                             "refine": {"fn": "tests.graph.search_nodes:refine", "next": "END"}}}}}}))
    runs = str(tmp_path / "runs")
    assert run(["run", str(workflow), "-o", runs, "--thread-id", "t", "-i", '{"task": "x"}', "--json"]) == 0
    capsys.readouterr()
    for branch in ("t~go~b0", "t~go~b1"):
        assert run(["run", "-o", runs, "--history", branch, "--json"]) == 0, capsys.readouterr().err
        points = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [p["after"] for p in points if p["after"]][-2:] == [["attempt"], ["refine"]], points
    assert run(["run", "-o", runs, "--history", "t~nosuch~b0"]) == 2
    assert "no search node 'nosuch'" in capsys.readouterr().err
