"""The search you can see: the report a search node writes (its `output:`) holds, per branch, its workspace
diff, its test result and its value both own and backed up (MCTS: the mean over the branches below it), as
typed fields (`search.BranchReport`); the tree's root carries the backed-up mean, not its own 0; the events
the viewer draws the tree from carry `mean`; `run --history --json` lists the branches with value and test
result. A local sandbox workspace and real SQLite checkpoints."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentflow.events import EventLog
from agentflow.graph import WorkflowRunner
from agentflow.graph.define.loader import spec_from_dict
from agentflow.graph.run.context import RunHandles
from agentflow.graph.search.tree import BranchReport, SearchReport


def _workflow(strategy: str, n: int) -> dict[str, Any]:
    return {
        "name": "seen",
        "state": {"task": {"type": "str"}, "tests": {"type": "dict"}, "report": {"type": "dict"}},
        "nodes": {"go": {
            "search": {"strategy": strategy, "n": n, "value": "tests.ok", "concurrency": 1},
            "output": "report", "next": "END",
            "subgraph": {"name": "try", "nodes": {"work": {"fn": "tests.graph.search_nodes:edit_and_test",
                                                           "next": "END"}}}}},
    }


def _repo(root: Path) -> Path:
    root.mkdir()
    (root / "README").write_text("a repo\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


@pytest.mark.parametrize("strategy", ["mcts", "best_of_n", "beam"])
async def test_the_report_holds_each_branchs_diff_tests_and_values(tmp_path: Path, strategy: str) -> None:
    events = EventLog()
    runner = WorkflowRunner(spec_from_dict(_workflow(strategy, 4)), run_dir=tmp_path / "run", sandbox="local",
                            workspace=_repo(tmp_path / "repo"), context=RunHandles(events=events))
    async with runner:
        result = await runner.start({"task": "x"}, thread_id="t")
        history = await runner.history("t")
    assert result.status == "done", result.errors
    report = SearchReport.model_validate(result.state["report"])  # typed: every field there
    assert report.branches and all(isinstance(b, BranchReport) for b in report.branches)
    for branch in report.branches:
        k = int(branch.id[1:])
        assert branch.tests == {"ok": k % 2 == 0, "summary": f"b{k}: {'pass' if k % 2 == 0 else 'fail'}"}
        assert branch.value == (1.0 if k % 2 == 0 else 0.0)
        assert branch.diff is not None and f"+made by b{k}" in branch.diff and branch.diff_id
        assert f"b{k + 1}.txt" not in branch.diff  # its own fork of the workspace, nobody else's edit
        assert branch.mean == branch.value  # a branch with no children: its backed-up value is its own
    if strategy == "mcts":
        values = [b.value for b in report.branches]
        assert report.visits == len(values) and report.mean == pytest.approx(sum(values) / len(values))
        root = [e for e in events.events if e.kind == "search.node" and e.node_id == "go" and e.data.get("final")]
        assert root[-1].data["mean"] == pytest.approx(report.mean) and report.mean > 0  # not the root's own 0
    listed = [p.summary()["searches"] for p in history if p.searches]
    assert len(listed) == 1 and [b["id"] for b in listed[0]["report"]] == [b.id for b in report.branches]
    assert all(b["tests_ok"] == (int(b["id"][1:]) % 2 == 0) and b["value"] is not None for b in listed[0]["report"])
