"""`agentflow repair` on inikit-1 in the local sandbox, the coder a scripted function of its prompt: concurrent
branches start from distinct suspects, and a branch whose answer changes nothing asks the next time in another
way (`rollout.NOOP_ESCALATION`: the other edit format, then the failure report, then another suspect), each
try told what the one before did."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from agentflow.cli.main import run
from agentflow.models.base import ChatRequest
from agentflow.repair.locate.localize import functions_touched
from tests.swe_fixtures import resolve_bench

from .conftest import ROOT, TASKS_FILE, read_jsonl, short

REPO = ROOT / "examples" / "swe-tasks" / "repos" / "inikit"
SNIPPET = re.compile(r"The bug is most likely here:\n```python\n(.*?)\n```", re.DOTALL)
UNCHANGED_BLOCK = ('inikit/parser.py\n<<<<<<< SEARCH\n        parts = stripped.split("=")\n=======\n'
                   '        parts = stripped.split("=")\n>>>>>>> REPLACE\nEND_EDITS')
FIX_BLOCK = UNCHANGED_BLOCK.replace('split("=")\n>>>>>>>', 'split("=", 1)\n>>>>>>>')
TRACEBACK = ('Traceback (most recent call last):\n  File "app.py", line 4, in <module>\n'
             '    assert cfg.get("db", "url").endswith("connect_timeout=5")\nAssertionError')


def marks_the_function(request: ChatRequest) -> str:
    """Gives the function it is asked to rewrite back with a comment in it (a usable edit of that function)."""
    snippet = SNIPPET.search(request.messages[-1].content or "")
    assert snippet, "a rewrite prompt"
    head, _, body = snippet.group(1).partition("\n")
    return f"```python\n{head}\n    # looked at\n{body}\n```"


def changes_nothing_until_shown_another_suspect(request: ChatRequest) -> str:
    """Gives the code back unchanged (as a rewrite, then as a block that changes nothing) until its prompt says
    another suspect is shown; then the fix."""
    prompt = request.messages[-1].content or ""
    if (snippet := SNIPPET.search(prompt)) is not None:
        return f"```python\n{snippet.group(1)}\n```"
    return FIX_BLOCK if "is shown this time" in prompt else UNCHANGED_BLOCK


def repair(tmp_path: Path, coder: str, *args: str, tasks: Path = TASKS_FILE) -> Path:
    out = tmp_path / "run"
    run(["repair", "--tasks", str(tasks), "-i", "inikit__inikit-1", "--sandbox", "local", "-o", str(out),
         "--model", f"function:tests.repair.test_branch_diversity:{coder}", "-c", "rank=false",
         "-c", "spectrum=false", "-c", "reproduce=false", "-c", "sampling.batch_samples=1",
         "-c", "search.max_attempts=1", "-c", "trace.content=true", *args])
    return out


def test_concurrent_branches_edit_distinct_functions_first(tmp_path: Path) -> None:
    """best-of-4 from the unchanged code: four concurrent branches, four suspects; each branch's first edit
    changes another function (the suspect it was shown first)."""
    out = repair(tmp_path, "marks_the_function", "--strategy", "best_of_n", "-n", "4", "-c", "search.concurrency=4",
                 "-c", "edit.format=rewrite")
    events = read_jsonl(out / "events.jsonl")
    suspects = next(e["data"]["suspects"] for e in events if e["kind"] == "repair.base")
    assert len(set(suspects)) >= 4
    cands = read_jsonl(out / "instances" / "inikit__inikit-1" / "candidates.jsonl")
    firsts = {short(c["candidate_id"]).split(".")[0]: c for c in cands if short(c["candidate_id"]).endswith(".1")}
    assert sorted(firsts) == ["b0", "b1", "b2", "b3"]
    sources = {str(p.relative_to(REPO)): p.read_text() for p in REPO.rglob("*.py")}
    edited = {b: functions_touched(c["patch"], sources) for b, c in firsts.items()}
    assert all(len(fns) == 1 for fns in edited.values()), edited
    assert len({fns[0] for fns in edited.values()}) == 4, edited
    assert {fns[0] for fns in edited.values()} == {c["window"] for c in firsts.values()} <= set(suspects)


def task_with_traceback(tmp_path: Path) -> Path:
    """A tasks file of inikit-1 (a copy of its repository) whose statement shows a script's traceback."""
    repo = tmp_path / "repos" / "inikit"
    shutil.copytree(REPO, repo)
    task = next(row for row in read_jsonl(TASKS_FILE) if row["instance_id"] == "inikit__inikit-1")
    task["problem_statement"] += f"\n\nA script shows it:\n```\n{TRACEBACK}\n```\n"
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(task) + "\n")
    return tasks


def test_a_branch_that_gets_unchanged_code_asks_another_way_each_time(tmp_path: Path) -> None:
    """One chain, rewrite first. The model gives the suspect back unchanged; the next prompt asks for
    SEARCH/REPLACE blocks, told `noop: the code came back unchanged`; its block changes nothing; the next
    shows the statement's traceback as the failure; again nothing; the next shows another suspect first, and
    the fix comes. Each try is a sample: four, three of them noops, each saying what its prompt changed."""
    tasks = task_with_traceback(tmp_path)
    out = repair(tmp_path, "changes_nothing_until_shown_another_suspect", "-c", "edit.format=rewrite",
                 "-c", "search.concurrency=1", tasks=tasks)
    events = read_jsonl(out / "events.jsonl")
    prompts = [e["data"]["messages"][-1]["content"] for e in events if e["kind"] == "model.call"]
    assert len(prompts) == 4
    assert "Rewrite this code with the bug fixed" in prompts[0] and "<<<<<<< SEARCH" not in prompts[0]
    assert "Your edit was not applied (noop: the code came back unchanged)." in prompts[1]
    assert "<<<<<<< SEARCH" in prompts[1] and "other form" in prompts[1]
    assert "The failure the bug causes" not in prompts[1]
    assert "The failure the bug causes:\n```\n" + TRACEBACK in prompts[2] and "<<<<<<< SEARCH" in prompts[2]
    assert "is shown this time" in prompts[3] and "The failure the bug causes:" in prompts[3]
    cands = read_jsonl(out / "instances" / "inikit__inikit-1" / "candidates.jsonl")
    assert [(c["status"], c["approach"]) for c in cands] == [
        ("noop", []), ("noop", ["format"]), ("noop", ["format", "failure"]), ("ok", ["format", "failure", "suspect"])]
    assert cands[0]["edit_errors"] == ["the code came back unchanged"]
    assert cands[0]["window"] == cands[1]["window"] == cands[2]["window"] != cands[3]["window"]
    shown = cands[3]["window"].split(":")[1]
    assert f"`{shown}` from" in prompts[3]
    # the noops are counted where a benchmark reads them: the candidates' events
    statuses = [e["data"]["status"] for e in events if e["kind"] == "repair.candidate"]
    assert statuses.count("noop") == 3 and statuses.count("ok") == 1
    assert json.loads((out / "report.json").read_text())["resolved_ids"] == ["inikit__inikit-1"]
    # and the benchmark reports them: noop samples / samples, and what came of the tries after a noop
    samples = resolve_bench().where_samples_go(out, tasks)
    assert (samples["samples"]["noop"], samples["samples"]["total"], samples["samples"]["noop_share"]) == (3, 4, 0.75)
    assert {k: {s: n for s, n in mix.items() if n} for k, mix in samples["after_noop"].items()} == {
        "format": {"noop": 1}, "failure": {"noop": 1}, "suspect": {"patch": 1}}



def test_the_failure_report_is_the_traced_runs_traceback_else_the_statements() -> None:
    from agentflow.repair.edit.steps import failure_report

    traced = 'Traceback (most recent call last):\n  File "<example>", line 1\n    get()\nKeyError: \'maybe\'\n'
    statement = f"Some words.\n```\n{TRACEBACK}\n```\nMore words after it."
    assert failure_report(statement, traced) == traced.rstrip("\n")
    assert failure_report(statement, "") == TRACEBACK  # to the exception line, not the words after it
    pytest_report = "test_x.py:12: in test_x\nE   assert 'a' == 'a=b'\nE     - a=b\nwords"
    assert failure_report(pytest_report, "") == "test_x.py:12: in test_x\nE   assert 'a' == 'a=b'\nE     - a=b"
    assert failure_report("no failure here", "") == ""


def test_the_order_of_the_changes_after_a_noop_is_a_setting(tmp_path: Path) -> None:
    """`noop_escalation=[failure,suspect]`: the format stays rewrite; the failure first, then another suspect for
    each further noop (the last step again)."""
    out = repair(tmp_path, "changes_nothing_until_shown_another_suspect", "-c", "edit.format=rewrite",
                 "-c", "search.concurrency=1", "-c", "noop_escalation=[failure,suspect]",
                 tasks=task_with_traceback(tmp_path))
    events = read_jsonl(out / "events.jsonl")
    prompts = [e["data"]["messages"][-1]["content"] for e in events if e["kind"] == "model.call"]
    assert not any("<<<<<<< SEARCH" in p for p in prompts)
    assert "The failure the bug causes:\n```\n" + TRACEBACK in prompts[1] and "is shown this time" not in prompts[1]
    assert "is shown this time" in prompts[2]
    cands = read_jsonl(out / "instances" / "inikit__inikit-1" / "candidates.jsonl")
    assert [c["approach"] for c in cands] == [[], ["failure"], ["failure", "suspect"],
                                              ["failure", "suspect", "suspect"]]
    assert len({c["window"] for c in cands[1:]}) == 3  # each noop after the failure: another suspect
