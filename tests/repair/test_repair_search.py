"""`workflows/repair_search.yaml`: the repair's attempts as real graph nodes (swe.edit -> swe.test ->
swe.critique) in the branches of a graph search node, end to end in Docker with replayed answers. Each branch
runs its nodes as graph nodes (events tagged with the search and the branch) in its own fork of the task's
workspace; `swe.choose` picks among the candidates of all branches. Scripted answers are served in order, so
branches run one at a time (`concurrency=1`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentflow.cli.main import run

from .conftest import CASSETTES, ROOT, TASKS_FILE, read_jsonl, scripted_cassette

pytestmark = pytest.mark.docker

IID = "inikit__inikit-1"
WRONG = ('inikit/parser.py\n<<<<<<< SEARCH\n        parts = stripped.split("=")\n=======\n'
         '        parts = stripped.split("=", 2)\n>>>>>>> REPLACE\nEND_EDITS')
ON_WRONG = ('inikit/parser.py\n<<<<<<< SEARCH\n        parts = stripped.split("=", 2)\n=======\n'
            '        parts = stripped.split("=", 1)\n>>>>>>> REPLACE\nEND_EDITS')


def repair(out: Path, image: str, *args: str) -> int:
    return run(["repair", "--workflow", "repair_search", "--sandbox", "docker", "-c", f"sandbox.image={image}",
                "-c", "concurrency=1", "-c", "edit_format=search_replace", "-o", str(out), *args])


def task(cassette: Path, *, oracle: bool = True) -> list[str]:
    args = ["--tasks", str(TASKS_FILE), "-i", IID, "--model", f"replay:{cassette}"]
    return args + (["-c", "feedback=task"] if oracle else [])


def short(cid: str | None) -> str | None:
    return cid.rsplit("/", 1)[1] if cid else None


def branches(events: list[dict[str, Any]]) -> dict[str, str | None]:
    """Branch -> its parent in the search tree, from the final `search.node` events."""
    return {e["node_id"].rsplit("/", 1)[1]: short(e["parent_id"]) for e in events
            if e["kind"] == "search.node" and e["data"].get("final") and e["parent_id"]}


def ran_in(events: list[dict[str, Any]], branch: str) -> list[str]:
    """The graph nodes a branch ran, in order."""
    return [e["node_id"].rsplit("/", 1)[1] for e in events if e["kind"] == "node.start"
            and e["data"].get("search") == "attempt" and e["data"].get("branch") == branch]


def test_a_plain_repository_with_a_test_command(docker_image: str, tmp_path: Path) -> None:
    """`agentflow repair REPO --issue-file ... --test-cmd ... --workflow repair_search --apply`: one branch, whose
    nodes run as graph nodes in its own workspace; the fix is applied to the repository."""
    repo = tmp_path / "inikit"
    shutil.copytree(ROOT / "examples" / "swe-tasks" / "repos" / "inikit", repo)
    issue = tmp_path / "issue.md"
    issue.write_text("Values containing `=` are cut off after the second `=` by `loads`.\n")
    check = "python3 -c \"from inikit import loads; assert loads('[a]\\nk = x=y\\n').get('a', 'k') == 'x=y'\""
    out = tmp_path / "run"
    assert repair(out, docker_image, str(repo), "--issue-file", str(issue), "--test-cmd", check, "--apply",
                  "--model", f"replay:{CASSETTES / 'bench' / 'inikit__inikit-1.json'}") == 0
    assert 'split("=", 1)' in (repo / "inikit" / "parser.py").read_text()
    (cand,) = read_jsonl(out / "candidates.jsonl")
    assert short(cand["candidate_id"]) == "b0.1" and cand["verification"]["kind"] == "test_cmd"
    assert cand["verification"]["passed"] is True
    events = read_jsonl(out / "events.jsonl")
    assert branches(events) == {"b0": "attempt"}
    assert ran_in(events, "b0") == ["edit", "test"]  # passed at once: no critique, no second attempt
    main = [e["node_id"].rsplit("/", 1)[1] for e in events if e["kind"] == "node.start" and "branch" not in e["data"]]
    assert main == ["baseline", "spectrum", "rank", "reproduce", "plan", "attempt", "choose"]
    attempt = next(e for e in events if e["kind"] == "repair.attempt")
    assert (attempt["data"]["search"], attempt["data"]["branch"]) == ("attempt", "b0")


def test_one_chain_builds_each_attempt_on_the_last(docker_image: str, tmp_path: Path) -> None:
    """The default: one branch, a chain of attempts. An unchanged answer is recorded and drawn again; the wrong
    edit fails its tests; the critique node (off) passes; the next edit reads that feedback and builds on it."""
    out = tmp_path / "run"
    assert repair(out, docker_image, *task(CASSETTES / "single_inikit-1.json")) == 0
    cands = read_jsonl(out / "candidates.jsonl")
    assert [(short(c["candidate_id"]), short(c["parent_id"]), c["status"]) for c in cands] == [
        ("b0.1", "root", "noop"), ("b0.2", "root", "ok"), ("b0.3", "b0.2", "ok")]
    assert [c["verification"]["passed"] for c in cands[1:]] == [False, True]
    events = read_jsonl(out / "events.jsonl")
    assert ran_in(events, "b0") == ["edit", "test", "critique", "edit", "test"]
    outcome = json.loads((out / "instances" / IID / "outcome.json").read_text())
    assert outcome["chosen"] == f"{IID}/b0.3" and outcome["report"]["resolved"] is True
    assert outcome["samples"] == 3 and outcome["suspects"]
    # the branch's checkpoints are its own thread in the task's checkpoint file, its workspace diff recorded
    resolved = (out / "config.resolved.yaml").read_text()
    assert "attempt:" in resolved and "strategy: best_of_n" in resolved


def test_best_of_4_in_blind_mode_votes_over_every_branch(docker_image: str, tmp_path: Path) -> None:
    """Four branches, one attempt each, each in its own fork of the workspace holding the reproduction script;
    the choice counts the samples of all branches (gathered): two agree on the fix."""
    out = tmp_path / "run"
    args = task(CASSETTES / "blind_inikit-1.json", oracle=False)
    assert repair(out, docker_image, *args, "--strategy", "best-of-n", "-n", "4", "-c", "max_attempts=1",
                  "-c", "keep_check=false") == 0
    cands = read_jsonl(out / "candidates.jsonl")
    assert [(short(c["candidate_id"]), c["status"]) for c in cands] == [(f"b{k}.1", "ok") for k in range(4)]
    verdicts = [(c["verification"]["reproduced"], c["verification"]["passed"]) for c in cands]
    assert verdicts == [(False, None), (True, False), (False, None), (False, None)]
    events = read_jsonl(out / "events.jsonl")
    assert branches(events) == {f"b{k}": "attempt" for k in range(4)}
    assert all(ran_in(events, f"b{k}") == ["edit", "test"] for k in range(4))
    outcome = json.loads((out / "instances" / IID / "outcome.json").read_text())
    assert outcome["chosen"] == f"{IID}/b0.1" and outcome["chosen_by"] == "vote"
    assert outcome["report"]["resolved"] is True


@pytest.mark.parametrize(("strategy", "n"), [("rebase", 2), ("mcts", 3)])
def test_stepwise_strategies_expand_a_branch_from_its_checkpoint_and_workspace(
        docker_image: str, tmp_path: Path, strategy: str, n: int) -> None:
    """REBASE and MCTS drive the repair's rollouts: a step is edit -> test -> critique; the first two branches
    make the same wrong edit from the unchanged code, then a child of one of them continues its chain (its
    sample numbers go on from the parent's) with an edit whose SEARCH lines exist only in its parent's
    workspace, and passes. The last expansion draws no sample: a candidate passed (stop_on_success)."""
    cassette = scripted_cassette(tmp_path / "c.json", ["1", WRONG, WRONG, ON_WRONG])
    out = tmp_path / "run"
    assert repair(out, docker_image, *task(cassette), "-c", f"nodes.attempt.strategy={strategy}",
                  "-c", f"nodes.attempt.n={n}") == 0
    events = read_jsonl(out / "events.jsonl")
    tree = branches(events)
    assert tree["b0"] == tree["b1"] == "attempt" and tree["b2"] in ("b0", "b1")
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


def test_a_tool_calling_edit_in_a_branch(docker_image: str, tmp_path: Path) -> None:
    """`edit_format: tools`: the branch's edit is a tool-calling loop on an in-memory copy of the sources (the
    sampling the search policy uses); the files it changed are written into the branch's workspace and verified."""
    out = tmp_path / "run"
    assert repair(out, docker_image, *task(CASSETTES / "tools_inikit-1.json"), "-c", "edit_format=tools") == 0
    (cand,) = read_jsonl(out / "candidates.jsonl")
    assert short(cand["candidate_id"]) == "b0.1" and cand["verification"]["passed"] is True
    events = read_jsonl(out / "events.jsonl")
    assert next(e for e in events if e["kind"] == "repair.tool_edit")["data"]["files"] == ["inikit/parser.py"]
    assert json.loads((out / "report.json").read_text())["resolved_ids"] == [IID]


def test_the_step_limit_ends_the_branch_and_the_best_patch_so_far_is_kept(docker_image: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    # 3 calls: the ranking, an unchanged answer (drawn again), the first (wrong) candidate; the next edit is refused
    assert repair(out, docker_image, *task(CASSETTES / "single_inikit-1.json"), "--step-limit", "3") == 1
    inst = json.loads((out / "report.json").read_text())["instances"][IID]
    assert inst["status"] == "limits_exceeded:model_calls" and inst["resolved"] is False
    assert 'split("=", 2)' in read_jsonl(out / "preds.jsonl")[0]["model_patch"]
    stopped = [e for e in read_jsonl(out / "events.jsonl") if e["kind"] == "repair.stopped"]
    assert stopped and stopped[0]["data"]["reason"] == "limits_exceeded:model_calls"


def test_bench_runs_the_workflow_on_several_tasks(docker_image: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    ids = ["inikit__inikit-1", "cachette__cachette-2", "tabkit__tabkit-2"]
    argv = ["bench", str(TASKS_FILE), "--workflow", "repair_search", "--model",
            f"replay:{CASSETTES / 'bench' / '{instance_id}.json'}", "--sandbox", "docker", "-c",
            f"sandbox.image={docker_image}", "-c", "feedback=task", "-c", "edit_format=search_replace",
            "--workers", "2", "-o", str(out)]
    for iid in ids:
        argv += ["-i", iid]
    assert run(argv) == 0
    assert sorted(json.loads((out / "report.json").read_text())["resolved_ids"]) == sorted(ids)
    events = read_jsonl(out / "events.jsonl")
    for iid in ids:  # every task's branch, under its own search node
        assert any(e["kind"] == "search.node" and e["node_id"] == f"{iid}/attempt/b0" for e in events)


OTHER = ('inikit/parser.py\n<<<<<<< SEARCH\n        parts = stripped.split("=")\n=======\n'
         '        parts = stripped.split("=", 3)\n>>>>>>> REPLACE\nEND_EDITS')


def test_the_value_agent_steers_rebase_over_repair_branches(docker_image: str, tmp_path: Path) -> None:
    """SWE-Search's value node in the branches of a REBASE search: both first branches make a wrong edit that
    scores like the unchanged code on the tests, the value agent values b0's 80 and b1's 10, so both of the next
    step's expansions continue b0 (from its checkpoint and workspace), and the next edit reads b0's assessment."""
    workflow = tmp_path / "valued.yaml"
    text = (ROOT / "workflows" / "repair_search.yaml").read_text()
    text = text.replace("step_until: [critique]", "step_until: [value]").replace("retry: critique", "retry: value")
    workflow.write_text(text.replace("critique: {type: swe.critique, next: edit}", "value: {type: swe.value, next: edit}"))
    answers = ["1", WRONG, "Value: 80\nAssessment: [ASSESSED-B0] splits too often.", OTHER,
               "Value: 10\nAssessment: [ASSESSED-B1] wrong place.", ON_WRONG]
    cassette = scripted_cassette(tmp_path / "c.json", answers)
    out = tmp_path / "run"
    code = run(["repair", *task(cassette), "--workflow", str(workflow), "--sandbox", "docker", "-c",
                f"sandbox.image={docker_image}", "-c", "concurrency=1", "-c", "edit_format=search_replace",
                "-c", "trace.content=true", "-c", "nodes.attempt.strategy=rebase", "-c", "nodes.attempt.n=2",
                "-o", str(out)])
    assert code == 0
    events = read_jsonl(out / "events.jsonl")
    assert branches(events) == {"b0": "attempt", "b1": "attempt", "b2": "b0", "b3": "b0"}
    values = {short(e["node_id"]): e["data"]["search_value"] for e in events if e["kind"] == "repair.value"}
    assert values == {"b0.1": 0.8, "b1.1": 0.1}
    prompts = [e["data"]["messages"][-1]["content"] for e in events if e["kind"] == "model.call"]
    assert "[ASSESSED-B0]" in prompts[5] and "[ASSESSED-B1]" not in prompts[5]
    outcome = json.loads((out / "instances" / IID / "outcome.json").read_text())
    assert outcome["chosen"] == f"{IID}/b2.2" and outcome["report"]["resolved"] is True
