"""A repair killed with -9 mid-task resumes at the node where it stopped: the nodes that had finished are not
run again, and neither are their model calls (checked at the model server, a real loopback HTTP process).
Killed inside the search, it resumes inside it: a branch whose run had finished is taken as it was, one that
was running goes on from its own last checkpoint (an MCTS search killed between steps:
test_repair_search_resume.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentflow.cli.main import run
from tests.models.conftest import FakeServer, fake_server_process
from tests.swe_fixtures import kill_9_when

from .conftest import ROOT, TASKS_FILE, ran_in, read_jsonl, short

pytestmark = pytest.mark.docker
IID = "inikit__inikit-1"
RIGHT = ('inikit/parser.py\n<<<<<<< SEARCH\n        parts = stripped.split("=")\n=======\n'
         '        parts = stripped.split("=", 1)\n>>>>>>> REPLACE\nEND_EDITS')


@pytest.fixture
def model_server() -> Iterator[FakeServer]:
    with fake_server_process() as server:
        yield server


def _bench(out: Path, image: str, spec: str, *extra: str) -> list[str]:
    return ["bench", str(TASKS_FILE), "-i", IID, "--model", spec, "--sandbox", "docker", "-c", f"sandbox.image={image}",
            "-c", "tests.feedback=task", "-c", "mutants=false", "-c", "edit.format=search_replace", "-c", "model_options.max_attempts=1",
            "-o", str(out), *extra]


def _rank_requests(server: FakeServer) -> int:
    return sum("Which of these" in json.dumps(r["body"]) for r in server.requests())


def _branch_events(events: list[dict], kind: str = "search.branch") -> list[tuple[str, str]]:
    """(what happened, branch) of the search's `search.branch` events."""
    return [(e["data"]["event"], e["node_id"].rsplit("/", 1)[1]) for e in events if e["kind"] == kind]


def _main_line(events: list[dict]) -> list[str]:
    """The workflow's own nodes that started (not the search's branches' nodes)."""
    return [e["node_id"].split("/", 1)[1] for e in events if e["kind"] == "node.start" and "branch" not in e["data"]]


def test_kill_9_mid_task_then_resume_continues_at_the_search(docker_image: str, model_server: FakeServer, tmp_path: Path) -> None:
    out = tmp_path / "run"
    # the ranking answers at once; the first edit takes long enough to kill the run while it waits
    model_server.script({"content": "1"}, {"content": RIGHT, "delay": 60})
    agentflow = str(Path(sys.executable).parent / "agentflow")
    proc = subprocess.Popen([agentflow, *_bench(out, docker_image, model_server.spec())], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    events_file = out / "events.jsonl"

    def editing() -> bool:  # the search's branch is in its edit node, waiting for the model
        return len(model_server.requests()) == 2

    kill_9_when(proc, editing, timeout=240, what="run")
    assert _rank_requests(model_server) == 1
    first = read_jsonl(events_file)
    assert ("start", "b0") in _branch_events(first) and ("end", "b0") not in _branch_events(first)

    model_server.reset()
    model_server.script({"content": RIGHT})
    assert run(_bench(out, docker_image, model_server.spec(), "--resume")) == 0
    after = read_jsonl(events_file)[len(first):]
    resumed = [e for e in after if e["kind"] == "repair.resume"]
    assert resumed and resumed[0]["data"]["next"] == ["search"]
    assert _main_line(after) == ["search", "choose"]  # baseline, rank, reproduce and plan had finished: not run again
    # the search took up its branch: it went on from its own last checkpoint, in its edit node
    (search,) = [e for e in after if e["kind"] == "search.resume"]
    assert (search["data"]["branches"], search["data"]["finished"]) == (1, 0)
    assert _branch_events(after) == [("resume", "b0"), ("end", "b0")]
    assert ran_in(after, "b0") == ["edit", "test"]
    assert _rank_requests(model_server) == 0  # the ranking's model call was not repeated
    assert len(model_server.requests()) == 1  # only the edit, which had no answer yet
    outcome = json.loads((out / "instances" / IID / "outcome.json").read_text())
    assert outcome["status"] == "submitted" and outcome["report"]["resolved"] is True
    assert outcome["ranked"]  # the ranking came back from the checkpoint
    assert outcome["chosen"] == f"{IID}/b0.1"


# a wrong edit that applies and parses: the value after the first '=' is cut at the next one
WRONG = ('inikit/parser.py\n<<<<<<< SEARCH\n        parts = stripped.split("=")\n=======\n'
         '        parts = stripped.split("=", 2)[:2]\n>>>>>>> REPLACE\nEND_EDITS')


def _edit_requests(server: FakeServer) -> int:
    return sum("Which of these" not in json.dumps(r["body"]) for r in server.requests())


def test_kill_9_inside_the_search_then_resume_takes_its_finished_branch_as_it_was(
        docker_image: str, model_server: FakeServer, tmp_path: Path) -> None:
    """Best-of-2, one attempt a branch, the branches' edits sent at once: the first answer comes at once and its
    branch finishes, the second so late that the run is killed while it waits. Resumed, the finished branch is
    taken as it was (its nodes not run again, its candidate kept) and only the unanswered edit is asked again."""
    out = tmp_path / "run"
    model_server.script({"content": "1"}, {"content": WRONG}, {"content": RIGHT, "delay": 60})
    agentflow = str(Path(sys.executable).parent / "agentflow")
    best_of_2 = ("--strategy", "best_of_n", "-n", "2", "-c", "sampling.batch_samples=1", "-c", "search.max_attempts=1")
    argv = _bench(out, docker_image, model_server.spec(), *best_of_2)
    proc = subprocess.Popen([agentflow, *argv], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    events_file = out / "events.jsonl"

    def a_branch_finished() -> bool:
        text = events_file.read_text() if events_file.exists() else ""
        if '"search.branch"' not in text:
            return False
        # the run is writing the file: its last line may be partly written, so only whole lines are read
        whole = [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines() if line.strip()]
        return any(what == "end" for what, _ in _branch_events(whole))

    kill_9_when(proc, a_branch_finished, timeout=240, what="run")
    assert _edit_requests(model_server) == 2  # one answered, one in flight when killed
    first = read_jsonl(events_file)
    (finished,) = [b for what, b in _branch_events(first) if what == "end"]
    (waiting,) = {"b0", "b1"} - {finished}
    assert [short(e["data"]["candidate_id"]) for e in first if e["kind"] == "repair.candidate"] == [f"{finished}.1"]
    candidates = out / "instances" / IID / "candidates.jsonl"
    assert not candidates.exists()  # written from the task's state when it ends

    model_server.reset()
    model_server.script({"content": RIGHT})
    assert run([*argv, "--resume"]) == 0
    after = read_jsonl(events_file)[len(first):]
    assert _main_line(after) == ["search", "choose"]
    (search,) = [e for e in after if e["kind"] == "search.resume"]
    assert (search["data"]["branches"], search["data"]["finished"]) == (2, 1)
    branch_events = _branch_events(after)
    assert ("reused", finished) in branch_events and ("resume", waiting) in branch_events
    assert ran_in(after, finished) == [] and ran_in(after, waiting) == ["edit", "test"]
    # the answered sample was neither asked for again nor drawn again: one model call, the unanswered edit
    assert len(model_server.requests()) == 1
    calls = [e for e in after if e["kind"] == "model.call"]
    assert [(short(e["node_id"]), bool(e["data"].get("cached"))) for e in calls] == [(f"{waiting}.1", False)]
    # each candidate once, across the two legs: the finished branch's wrong edit and the fix
    rows = read_jsonl(candidates)
    assert sorted(short(r["candidate_id"]) for r in rows) == sorted([f"{finished}.1", f"{waiting}.1"])
    assert {r["status"] for r in rows} == {"ok"}
    outcome = json.loads((out / "instances" / IID / "outcome.json").read_text())
    assert outcome["status"] == "submitted" and outcome["report"]["resolved"] is True
    assert outcome["chosen"] == f"{IID}/{waiting}.1" and outcome["candidates"] == 2

    # the same answers in a run that is not killed: the same candidates (which branch drew which answer
    # follows the order the concurrent requests arrived in)
    model_server.reset()
    model_server.script({"content": "1"}, {"content": WRONG}, {"content": RIGHT})
    whole = tmp_path / "whole"
    assert run(_bench(whole, docker_image, model_server.spec(), *best_of_2)) == 0

    def recorded(path: Path) -> list[tuple[str, str, bool | None]]:
        return sorted((r["status"], r["patch"], r["verification"]["passed"]) for r in read_jsonl(path))

    assert recorded(whole / "instances" / IID / "candidates.jsonl") == recorded(candidates)


# the fix, on top of the wrong edit: it scores as well as the unchanged code (its tests pass, the script fails),
# so the next edit builds on it
FIX_AFTER_WRONG = ('inikit/parser.py\n<<<<<<< SEARCH\n        parts = stripped.split("=", 2)[:2]\n=======\n'
                   '        parts = stripped.split("=", 1)\n>>>>>>> REPLACE\nEND_EDITS')
REPRODUCTION = ('```python\nfrom inikit import loads\n\ncfg = loads("[db]\\nurl = a=b==\\n")\n'
                'assert cfg.get("db", "url") == "a=b==", cfg.get("db", "url")\n```\n')


def test_a_resumed_blind_task_verifies_as_the_killed_one_did(docker_image: str, model_server: FakeServer,
                                                             tmp_path: Path) -> None:
    """Blind mode: the reproduction script kept and the suite call-traced before the kill; killed while the first
    edit waits for the model. The resumed process, in a new sandbox, verifies each candidate as the killed one
    would have, from the checkpointed state alone: by the repository's tests run where the change reaches (the
    spectrum's reach) and by the kept script (the wrong edit still reproduces the issue, the fix does not)."""
    out = tmp_path / "run"
    argv = ["bench", str(TASKS_FILE), "-i", IID, "--model", model_server.spec(), "--sandbox", "docker",
            "-c", f"sandbox.image={docker_image}", "-c", "tests.feedback=repo", "-c", "edit.format=search_replace",
            "-c", "model_options.max_attempts=1", "-c", "keep_check=false", "-c", "search.max_attempts=2", "-o", str(out)]
    model_server.script({"content": "4, 1"}, {"content": REPRODUCTION}, {"content": WRONG, "delay": 60})
    agentflow = str(Path(sys.executable).parent / "agentflow")
    proc = subprocess.Popen([agentflow, *argv], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kill_9_when(proc, lambda: len(model_server.requests()) == 3, timeout=240, what="run")  # the edit in flight
    events_file = out / "events.jsonl"
    first = read_jsonl(events_file)
    (kept,) = [e["data"]["kept"] for e in first if e["kind"] == "repair.reproduce"]
    assert kept is True

    model_server.reset()
    model_server.script({"content": WRONG}, {"content": FIX_AFTER_WRONG})
    assert run([*argv, "--resume"]) == 0
    after = read_jsonl(events_file)[len(first):]
    assert _main_line(after) == ["search", "choose"]  # the nodes before the search had finished
    assert not [e for e in after if e["kind"] == "repair.reproduce"]
    rows = read_jsonl(out / "instances" / IID / "candidates.jsonl")
    assert [short(r["candidate_id"]) for r in rows] == ["b0.1", "b0.2"]
    verdicts = [(r["verification"]["kind"], r["verification"]["reproduced"], r["verification"]["passed"])
                for r in rows]
    assert verdicts == [("test_cmd", True, False), ("test_cmd", False, None)]
    assert "The issue still reproduces" in rows[0]["verification"]["output"]
    assert all(r["verification"]["targeted"] for r in rows)  # the tests reaching `loads`, not the whole suite
    outcome = json.loads((out / "instances" / IID / "outcome.json").read_text())
    assert outcome["status"] == "submitted" and outcome["chosen"] == f"{IID}/b0.2"
    assert outcome["reproduced"] is True and outcome["report"]["resolved"] is True
