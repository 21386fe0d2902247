"""The resume "write window": a run killed after a step's nodes saved their writes but before the checkpoint
after them was written. LangGraph's `snapshot.next` leaves out tasks whose writes are saved, so such a thread
looks finished by `next` alone; a resume must drive it on (the writes applied, the node not run again): the
run's own thread (`WorkflowRunner.resume`) and a search branch's (the search taking up a killed run's branches)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

from agentflow.graph import AgentflowSaver, Workflow, WorkflowRunner


class State(TypedDict, total=False):
    task: str
    plan: str
    answer: str


class Killed(BaseException):
    """The process dying (kill or Ctrl-C): not a node's failure, nothing catches it."""


class KilledAfterWrites(AgentflowSaver):
    """A saver whose process dies between a node's writes to `channel` and the next checkpoint of that thread
    (in threads named with `thread_part`); after that it writes nothing more."""

    def __init__(self, path: Path, channel: str, thread_part: str = "") -> None:
        super().__init__(path)
        self.channel, self.thread_part = channel, thread_part
        self.doomed: str | None = None  # the thread whose next checkpoint is never written
        self.dead = False

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        if self.dead:
            return
        super().put_writes(config, writes, task_id, task_path)
        thread = config["configurable"]["thread_id"]
        if self.thread_part in thread and any(channel == self.channel for channel, _ in writes):
            self.doomed = thread

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if self.dead or config["configurable"]["thread_id"] == self.doomed:
            self.dead = True
            raise Killed
        return await super().aput(config, checkpoint, metadata, new_versions)


def _workflow(ran: list[str], saver: KilledAfterWrites | None = None) -> Workflow:
    """plan -> answer; `saver`: nothing runs once its process died (a search branch writes its checkpoints in
    the background, so the answer node is already scheduled when the checkpoint before it fails)."""

    def plan(state: State) -> dict[str, Any]:
        ran.append("plan")
        return {"plan": f"plan for {state['task']}"}

    def answer(state: State) -> dict[str, Any]:
        if saver is not None and saver.dead:
            raise Killed
        ran.append("answer")
        return {"answer": f"done: {state['plan']}"}

    wf = Workflow("window", state=State)
    return wf.node("plan", plan).node("answer", answer).edge("plan", "answer").edge("answer", "END")


async def _kill(runner: WorkflowRunner, saver: AgentflowSaver) -> None:
    try:
        await runner.start({"task": "t"}, thread_id="t1")
        raise AssertionError("the run was to be killed")
    except Killed:
        pass
    finally:
        runner.close()
        saver.close()  # as on Ctrl-C: the step's buffered writes are committed, its next checkpoint is not


async def test_a_run_killed_between_a_steps_writes_and_the_next_checkpoint_resumes_to_its_end(
    tmp_path: Path,
) -> None:
    ran: list[str] = []
    spec = _workflow(ran).spec
    saver = KilledAfterWrites(tmp_path / "checkpoints.db", channel="plan")
    await _kill(WorkflowRunner(spec, run_dir=tmp_path, checkpointer=saver), saver)
    assert ran == ["plan"]

    runner = WorkflowRunner(spec, run_dir=tmp_path)
    try:
        snapshot = await runner.graph.aget_state({"configurable": {"thread_id": "t1"}})
        # the write window: the plan's writes are saved, the checkpoint after them is not, and `next` leaves the
        # plan out, so it is empty although the answer node never ran: the old done-check (`not snapshot.next`)
        # took this run for finished, without an answer
        assert snapshot.next == ()
        assert [(task.name, task.result) for task in snapshot.tasks] == [("plan", {"plan": "plan for t"})]
        assert "answer" not in snapshot.values
        result = await runner.resume("t1")
    finally:
        runner.close()
    assert result.status == "done"
    assert result.state.get("answer") == "done: plan for t"
    assert ran == ["plan", "answer"]  # the plan's saved writes were applied: it did not run again
    with AgentflowSaver(tmp_path / "checkpoints.db") as check:  # the thread ends in a checkpoint with the answer
        last = check.get_tuple({"configurable": {"thread_id": "t1"}})
    assert last is not None and last.checkpoint["channel_values"]["answer"] == "done: plan for t"


async def test_a_search_branch_killed_in_the_write_window_is_continued_not_taken_as_finished(
    tmp_path: Path,
) -> None:
    ran: list[str] = []
    saver = KilledAfterWrites(tmp_path / "checkpoints.db", channel="plan", thread_part="~go~b0")

    def outer(dying: KilledAfterWrites | None) -> Any:
        return Workflow("outer", state=State).search("go", _workflow(ran, dying), n=1).edge("go", "END").spec

    await _kill(WorkflowRunner(outer(saver), run_dir=tmp_path, checkpointer=saver), saver)
    assert ran == ["plan"]

    runner = WorkflowRunner(outer(None), run_dir=tmp_path)  # the same workflow in a new process
    try:
        branch = await runner._graph_at("go").aget_state({"configurable": {"thread_id": "t1~go~b0"}})
        assert branch.next == () and [task.name for task in branch.tasks] == ["plan"]  # the write window
        result = await runner.resume("t1")
    finally:
        runner.close()
    assert result.status == "done"
    # the branch went on from its saved writes: its answer is the search's, and its plan ran once
    assert result.state.get("answer") == "done: plan for t"
    assert ran == ["plan", "answer"]
