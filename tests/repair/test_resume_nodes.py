"""A repair killed with -9 mid-task resumes at the node where it stopped: the nodes that had finished are not
run again, and neither are their model calls (checked at the model server, a real loopback HTTP process)."""

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

from .conftest import ROOT, TASKS_FILE, read_jsonl

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
            "-c", "feedback=task", "-c", "edit_format=search_replace", "-c", "model_options.max_attempts=1",
            "-o", str(out), *extra]


def _rank_requests(server: FakeServer) -> int:
    return sum("Which of these" in json.dumps(r["body"]) for r in server.requests())


def test_kill_9_mid_task_then_resume_continues_at_the_search(docker_image: str, model_server: FakeServer, tmp_path: Path) -> None:
    out = tmp_path / "run"
    # the ranking answers at once; the first edit takes long enough to kill the run while it waits
    model_server.script({"content": "1"}, {"content": RIGHT, "delay": 60})
    agentflow = str(Path(sys.executable).parent / "agentflow")
    proc = subprocess.Popen([agentflow, *_bench(out, docker_image, model_server.spec())], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    events_file = out / "events.jsonl"

    def searching() -> bool:
        text = events_file.read_text() if events_file.exists() else ""
        return '"node.start"' in text and f'"{IID}/search"' in text

    kill_9_when(proc, searching, timeout=240, what="run")
    assert _rank_requests(model_server) == 1
    before = len(read_jsonl(events_file))

    model_server.reset()
    model_server.script({"content": RIGHT})
    assert run(_bench(out, docker_image, model_server.spec(), "--resume")) == 0
    after = read_jsonl(events_file)[before:]
    resumed = [e for e in after if e["kind"] == "repair.resume"]
    assert resumed and resumed[0]["data"]["next"] == ["search"]
    ran = [e["node_id"].split("/", 1)[1] for e in after if e["kind"] == "node.start"]
    assert ran == ["search", "choose"]  # baseline, rank, reproduce and plan had finished: not run again
    assert _rank_requests(model_server) == 0  # the ranking's model call was not repeated
    assert len(model_server.requests()) == 1  # only the edit
    outcome = json.loads((out / "instances" / IID / "outcome.json").read_text())
    assert outcome["status"] == "submitted" and outcome["report"]["resolved"] is True
    assert outcome["ranked"]  # the ranking came back from the checkpoint


# a wrong edit that applies and parses: the value after the first '=' is cut at the next one
WRONG = ('inikit/parser.py\n<<<<<<< SEARCH\n        parts = stripped.split("=")\n=======\n'
         '        parts = stripped.split("=", 2)[:2]\n>>>>>>> REPLACE\nEND_EDITS')


def _edit_requests(server: FakeServer) -> int:
    return sum("Which of these" not in json.dumps(r["body"]) for r in server.requests())


def test_kill_9_inside_the_search_then_resume_takes_its_completed_samples_from_the_call_journal(
        docker_image: str, model_server: FakeServer, tmp_path: Path) -> None:
    out = tmp_path / "run"
    # two samples, sent one by one: the first answered at once, the second so late that the run is killed
    # while it waits
    model_server.script({"content": "1"}, {"content": WRONG}, {"content": RIGHT, "delay": 60})
    agentflow = str(Path(sys.executable).parent / "agentflow")
    argv = _bench(out, docker_image, model_server.spec(), "--strategy", "best-of-n", "-n", "2",
                  "-c", "batch_samples=1", "-c", "max_attempts=1")
    proc = subprocess.Popen([agentflow, *argv], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    candidates = out / "instances" / IID / "candidates.jsonl"

    def first_sample_verified() -> bool:
        return candidates.exists() and bool(candidates.read_text().strip())

    kill_9_when(proc, first_sample_verified, timeout=240, what="run")
    assert _edit_requests(model_server) == 2  # one answered, one in flight when killed
    before = len(read_jsonl(out / "events.jsonl"))

    model_server.reset()
    model_server.script({"content": RIGHT})
    assert run([*argv, "--resume"]) == 0
    after = read_jsonl(out / "events.jsonl")[before:]
    ran = [e["node_id"].split("/", 1)[1] for e in after if e["kind"] == "node.start"]
    assert ran == ["search", "choose"]
    # the search started over, but only the sample that had not been answered went to the model
    assert len(model_server.requests()) == 1
    calls = [e["data"] for e in after if e["kind"] == "model.call"]
    assert sorted(bool(c.get("cached")) for c in calls) == [False, True]
    rows = read_jsonl(candidates)
    assert len(rows) == 2 and {r["status"] for r in rows} == {"ok"}  # the replayed wrong edit is a candidate again
    outcome = json.loads((out / "instances" / IID / "outcome.json").read_text())
    assert outcome["status"] == "submitted" and outcome["report"]["resolved"] is True
