"""Checkpoints that do not grow without end: `AgentflowSaver.prune(keep_last=N)` on a real SQLite file keeps
the newest N per thread and never what a paused run, a fork or a search still needs: each thread's latest
checkpoint with its pending writes (a paused run resumes, approves and finishes), a fork's source checkpoint
(forked again after the prune) and a fork's first checkpoint, pinned as the fork is written, or found in the
metadata of a file written before pins existed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentflow.errors import UserError
from agentflow.graph import WorkflowRunner, load_workflow
from agentflow.graph.persist.checkpoint import AgentflowSaver

WORKFLOW = str(Path(__file__).with_name("prune.yaml"))


def _ids(db: Path, thread: str) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT checkpoint_id FROM checkpoints WHERE thread_id=? AND ns='' "
                                           "ORDER BY checkpoint_id", (thread,))]


@pytest.mark.parametrize("pins_from", ["as-written", "metadata"])
async def test_prune_keeps_what_paused_runs_and_forks_need(tmp_path: Path, pins_from: str) -> None:
    rdir = tmp_path / "run"
    db = rdir / "checkpoints.db"
    spec = load_workflow(WORKFLOW)
    async with WorkflowRunner(spec, run_dir=rdir, keep_last=None) as runner:
        paused = await runner.start({}, thread_id="p")
        assert paused.status == "interrupted" and paused.state["n"] == 6
        history = await runner.history("p")
        source = [c for c in history if c.after == ["step"]][1]  # after the second step
        forked = await runner.fork("p", checkpoint_id=source.checkpoint_id, new_thread_id="f")
        assert forked.status == "interrupted" and forked.state["log"] == [f"step {k}" for k in range(1, 7)]
        fork_first = _ids(db, "f")[0]
        before = {t: _ids(db, t) for t in ("p", "f")}
        assert len(before["p"]) > 8 and len(before["f"]) > 4
        if pins_from == "metadata":  # a file from before pins: its forks are found in the metadata
            with sqlite3.connect(db) as conn:
                conn.execute("DELETE FROM pins")
        runner.checkpointer.prune(keep_last=2)
        assert runner.checkpointer.pruned == sum(map(len, before.values())) - 2 * 2 - 2
        left = {t: _ids(db, t) for t in ("p", "f")}
        assert left["p"] == sorted([*before["p"][-2:], source.checkpoint_id])  # the fork's source stays
        assert left["f"] == sorted([fork_first, *before["f"][-2:]])  # and the fork's first checkpoint
        # the paused runs resume from what is left, and the source forks again
        for thread in ("p", "f"):
            done = await runner.resume(thread, approve=True)
            assert done.status == "done" and done.state["published"] == "DRAFT ABOUT NOTHING", done
        again = await runner.fork("p", checkpoint_id=source.checkpoint_id, new_thread_id="g")
        assert again.status == "interrupted" and again.state["n"] == 6
    with AgentflowSaver(db, keep_last=None) as saver:  # as everything else, pins keep what prunes keep
        saver.prune(["p"])
        assert _ids(db, "p") == sorted([_ids(db, "p")[-1], source.checkpoint_id])
        assert saver.counts()["threads"] == 3


def test_prune_refuses_a_file_another_saver_has_open(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with AgentflowSaver(db) as running, AgentflowSaver(db) as other:
        with pytest.raises(UserError, match="open in another process"):
            other.prune(keep_last=1)
        running.close()
        other.prune(keep_last=1)  # alone now
    with AgentflowSaver(db) as saver, pytest.raises(ValueError, match="at least 1"):
        saver.prune(keep_last=0)


async def test_a_searchs_branches_keep_their_latest_checkpoint_only(tmp_path: Path) -> None:
    """A finished MCTS search: each branch thread starts with a copy of its parent's checkpoint (no pin: a
    resumed search needs only each branch's latest), so a prune leaves one per branch, and a branch's latest
    still forks."""
    from agentflow.graph.define.loader import spec_from_dict

    spec = spec_from_dict({
        "name": "s", "state": {"task": {"type": "str"}, "answer": {"type": "str"}, "score": {"type": "int"},
                               "steps": {"type": "list", "reducer": "append"}, "report": {"type": "dict"}},
        "nodes": {"go": {"search": {"strategy": "mcts", "n": 4, "value": "score"}, "output": "report",
                         "next": "END", "subgraph": {"name": "try", "nodes": {
                             "attempt": {"fn": "tests.graph.search_nodes:attempt", "next": "refine"},
                             "refine": {"fn": "tests.graph.search_nodes:refine", "next": "END"}}}}}})
    db = tmp_path / "checkpoints.db"
    async with WorkflowRunner(spec, run_dir=tmp_path, keep_last=None) as runner:
        result = await runner.start({"task": "x"}, thread_id="t")
        threads = [str(b["thread"]) for b in result.state["report"]["branches"]]
        assert any(len(_ids(db, t)) > 1 for t in threads)
        runner.checkpointer.prune(keep_last=1)
        assert all(len(_ids(db, t)) == 1 for t in threads)
        forked = await runner.fork(threads[-1], new_thread_id="f")
        assert forked.status == "done" and forked.state["steps"], forked
