"""A search node in a loop runs new branches on each pass: a later pass's branch threads carry the graph step
it runs in (`T~pick~s<step>~b0`), so neither a pass nor a resume of it takes an earlier pass's branches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agentflow.events import EventLog
from agentflow.graph import WorkflowRunner
from agentflow.graph.define.loader import spec_from_dict
from agentflow.graph.run.context import RunHandles
from agentflow.graph.search.settings import branch_path
from tests.graph.search_nodes import kill_when_paused, looped_search

ROOT = Path(__file__).resolve().parents[2]


def _branch_events(events: list[tuple[str, str]]) -> dict[str, list[str]]:
    """search.branch events as {moment: [node id, ...]} in order."""
    out: dict[str, list[str]] = {}
    for moment, node in events:
        out.setdefault(moment, []).append(node)
    return out


async def test_each_pass_of_a_search_in_a_loop_runs_its_own_branches(tmp_path: Path) -> None:
    events = EventLog()
    runner = WorkflowRunner(spec_from_dict(looped_search(rounds=3, n=2)), run_dir=tmp_path / "run",
                            context=RunHandles(events=events))
    result = await runner.start({}, thread_id="t")
    assert result.status == "done" and result.state["rounds"] == 3
    # the last pass's branches ran in round 2 and its choice is theirs: b1 of round 2
    report = result.state["report"]
    assert result.state["score"] == 21 and report["chosen"] == "b1"
    assert result.state["seen"] == ["r2:b0", "r2:b1"]
    threads = [b["thread"] for b in report["branches"]]
    last = threads[0].split("~")[2]
    assert last.startswith("s") and threads == [f"t~pick~{last}~b0", f"t~pick~{last}~b1"]
    moments = _branch_events([(e.data["event"], e.node_id or "") for e in events.events
                              if e.kind == "search.branch"])
    assert "reused" not in moments and "resume" not in moments
    passes = list(dict.fromkeys(node.rsplit("/", 1)[0] for node in moments["start"]))
    assert len(passes) == 3 and passes[0] == "pick" and passes[2] == f"pick/{last}"
    assert moments["start"] == [f"{p}/b{k}" for p in passes for k in range(2)]
    # every pass's branch threads are kept, each holding its own round's state (a later pass's thread id
    # names the search node, not its pass: `branch_path`)
    first, second = "t~pick~b1", f"t~pick~{passes[1].split('/')[1]}~b1"
    assert branch_path(second) == ["pick"] and branch_path(f"{second}~inner~s9~b0") == ["pick", "inner"]
    for thread, score in ((first, 1), (second, 11), (threads[1], 21)):
        assert (await runner.result(thread)).state["score"] == score
    runner.close()


def test_kill_9_in_the_second_pass_then_resume_reuses_that_pass_only(tmp_path: Path) -> None:
    """Killed while the second pass's third branch waits: the resumed search takes the second pass's two
    finished branches, continues the third from its own checkpoint, and runs nothing of the first pass again."""
    wf = tmp_path / "loop.json"
    wf.write_text(json.dumps(looped_search(rounds=2, n=3)))
    effects, runs = tmp_path / "effects.txt", tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AF_TEST_PAUSE_BRANCH": "r1:b2"}
    args = [sys.executable, "-m", "agentflow.cli.main", "run", str(wf), "-o", str(runs), "--thread-id", "t",
            "-i", json.dumps({"effects": str(effects)})]
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    kill_when_paused(proc, effects)
    assert effects.read_text().split() == ["r0:b0", "r0:b1", "r0:b2", "r1:b0", "r1:b1", "r1:b2"]

    env.pop("AF_TEST_PAUSE_BRANCH")
    resumed = subprocess.run([sys.executable, "-m", "agentflow.cli.main", "run", "-o", str(runs), "--resume", "t",
                              "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert result["status"] == "done" and result["state"]["rounds"] == 2
    # the second pass's choice, over its own three branches
    assert result["state"]["score"] == 12 and result["state"]["seen"] == ["r1:b0", "r1:b1", "r1:b2"]
    # each branch's journaled effect happened once: r1:b2's was replayed, not repeated
    assert effects.read_text().split() == ["r0:b0", "r0:b1", "r0:b2", "r1:b0", "r1:b1", "r1:b2"]
    (log,) = runs.glob("*/events.jsonl")
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    (resume_at,) = [i for i, e in enumerate(rows) if e["kind"] == "search.resume"]
    assert rows[resume_at]["data"]["branches"] == 3 and rows[resume_at]["data"]["finished"] == 2
    killed = [e["node_id"] for e in rows[:resume_at] if e["kind"] == "search.branch"][-1]  # r1:b2's start
    step = killed.split("/")[1]
    assert killed == f"pick/{step}/b2" and step.startswith("s")
    after = [(e["data"]["event"], e["node_id"]) for e in rows[resume_at:] if e["kind"] == "search.branch"]
    assert after[:3] == [("reused", f"pick/{step}/b0"), ("reused", f"pick/{step}/b1"), ("resume", f"pick/{step}/b2")]
    assert all(node.startswith(f"pick/{step}/") for _, node in after)
