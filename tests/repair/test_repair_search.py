"""The repair's search node (`workflows/repair.yaml`) beyond one chain: its stepwise strategies (REBASE, MCTS)
expand a branch from its checkpoint and its own fork of the task's workspace, a value node steers them, and
a bench's tasks keep their searches apart. Each branch runs its nodes as graph nodes (events tagged with the
search and the branch); `swe.choose` picks among the candidates of all branches. Scripted answers are served
in order, so branches run one at a time (`concurrency=1`). One chain, best-of-N, tool-calling edits and the
step limit: test_repair_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentflow.cli.main import run

from .conftest import CASSETTES, ROOT, TASKS_FILE, branches, ran_in, read_jsonl, scripted_cassette, short

pytestmark = pytest.mark.docker

IID = "inikit__inikit-1"
WRONG = ('inikit/parser.py\n<<<<<<< SEARCH\n        parts = stripped.split("=")\n=======\n'
         '        parts = stripped.split("=", 2)\n>>>>>>> REPLACE\nEND_EDITS')
ON_WRONG = ('inikit/parser.py\n<<<<<<< SEARCH\n        parts = stripped.split("=", 2)\n=======\n'
            '        parts = stripped.split("=", 1)\n>>>>>>> REPLACE\nEND_EDITS')


def repair(out: Path, image: str, *args: str) -> int:
    return run(["repair", "--sandbox", "docker", "-c", f"sandbox.image={image}",
                "-c", "search.concurrency=1", "-c", "edit.format=search_replace", "-o", str(out), *args])


def task(cassette: Path) -> list[str]:
    return ["--tasks", str(TASKS_FILE), "-i", IID, "--model", f"replay:{cassette}", "-c", "tests.feedback=task", "-c", "mutants=false"]


@pytest.mark.parametrize(("strategy", "n"), [("rebase", 2), ("mcts", 3)])
def test_stepwise_strategies_expand_a_branch_from_its_checkpoint_and_workspace(
        docker_image: str, tmp_path: Path, strategy: str, n: int) -> None:
    """REBASE and MCTS drive the repair's rollouts: a step is edit -> test -> critique; the first two branches
    make the same wrong edit from the unchanged code, then a child of one of them continues its chain (its
    sample numbers go on from the parent's) with an edit whose SEARCH lines exist only in its parent's
    workspace, and passes. The last expansion draws no sample: a candidate passed (stop_on_success)."""
    cassette = scripted_cassette(tmp_path / "c.json", ["1", WRONG, WRONG, ON_WRONG])
    out = tmp_path / "run"
    assert repair(out, docker_image, *task(cassette), "-c", f"nodes.search.strategy={strategy}",
                  "-c", f"nodes.search.n={n}") == 0
    events = read_jsonl(out / "events.jsonl")
    tree = branches(events)
    assert tree["b0"] == tree["b1"] == "search" and tree["b2"] in ("b0", "b1")
    parent = tree["b2"]
    cands = {short(c["candidate_id"]): c for c in read_jsonl(out / "candidates.jsonl")}
    assert sorted(cands) == ["b0.1", "b1.1", "b2.2"]
    fix = cands["b2.2"]
    assert short(fix["parent_id"]) == f"{parent}.1" and fix["verification"]["passed"] is True
    assert '+        parts = stripped.split("=", 1)' in fix["patch"]
    assert ran_in(events, "b0") == ["edit", "test", "critique"] and ran_in(events, "b2") == ["edit", "test"]
    outcome = json.loads((out / "instances" / IID / "outcome.json").read_text())
    assert outcome["chosen"] == f"{IID}/b2.2" and outcome["report"]["resolved"] is True
    assert sum(1 for e in events if e["kind"] == "model.call") == 4


def test_bench_runs_the_workflow_on_several_tasks(docker_image: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    ids = ["inikit__inikit-1", "cachette__cachette-2", "tabkit__tabkit-2"]
    argv = ["bench", str(TASKS_FILE), "--model",
            f"replay:{CASSETTES / 'bench' / '{instance_id}.json'}", "--sandbox", "docker", "-c",
            f"sandbox.image={docker_image}", "-c", "tests.feedback=task", "-c", "mutants=false", "-c", "edit.format=search_replace",
            "--workers", "2", "-o", str(out)]
    for iid in ids:
        argv += ["-i", iid]
    assert run(argv) == 0
    assert sorted(json.loads((out / "report.json").read_text())["resolved_ids"]) == sorted(ids)
    events = read_jsonl(out / "events.jsonl")
    for iid in ids:  # every task's branch, under its own search node
        assert any(e["kind"] == "search.node" and e["node_id"] == f"{iid}/search/b0" for e in events)


OTHER = ('inikit/parser.py\n<<<<<<< SEARCH\n        parts = stripped.split("=")\n=======\n'
         '        parts = stripped.split("=", 3)\n>>>>>>> REPLACE\nEND_EDITS')


def test_the_value_agent_steers_rebase_over_repair_branches(docker_image: str, tmp_path: Path) -> None:
    """SWE-Search's value node in the branches of a REBASE search: both first branches make a wrong edit that
    scores like the unchanged code on the tests, the value agent values b0's 80 and b1's 10, so both of the next
    step's expansions continue b0 (from its checkpoint and workspace), and the next edit reads b0's assessment."""
    workflow = tmp_path / "valued.yaml"
    text = (ROOT / "workflows" / "repair.yaml").read_text()
    text = text.replace("step_until: [critique]", "step_until: [value]").replace("retry: critique", "retry: value")
    workflow.write_text(text.replace("critique: {type: swe.critique, next: edit}", "value: {type: swe.value, next: edit}"))
    answers = ["1", WRONG, "Value: 80\nAssessment: [ASSESSED-B0] splits too often.", OTHER,
               "Value: 10\nAssessment: [ASSESSED-B1] wrong place.", ON_WRONG]
    cassette = scripted_cassette(tmp_path / "c.json", answers)
    out = tmp_path / "run"
    code = run(["repair", *task(cassette), "--workflow", str(workflow), "--sandbox", "docker", "-c",
                f"sandbox.image={docker_image}", "-c", "search.concurrency=1", "-c", "edit.format=search_replace",
                "-c", "trace.content=true", "-c", "nodes.search.strategy=rebase", "-c", "nodes.search.n=2",
                "-o", str(out)])
    assert code == 0
    events = read_jsonl(out / "events.jsonl")
    assert branches(events) == {"b0": "search", "b1": "search", "b2": "b0", "b3": "b0"}
    values = {short(e["node_id"]): e["data"]["search_value"] for e in events if e["kind"] == "repair.value"}
    assert values == {"b0.1": 0.8, "b1.1": 0.1}
    prompts = [e["data"]["messages"][-1]["content"] for e in events if e["kind"] == "model.call"]
    assert "[ASSESSED-B0]" in prompts[5] and "[ASSESSED-B1]" not in prompts[5]
    outcome = json.loads((out / "instances" / IID / "outcome.json").read_text())
    assert outcome["chosen"] == f"{IID}/b2.2" and outcome["report"]["resolved"] is True
