"""The run ledger from Python: a runner on a run folder writes run.json, events.jsonl and usage.json without
the CLI, a runner opened later on the same folder carries the usage on, and reading where a thread stands
builds no model (a `local:` model would start a llama-server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

import pytest

from agentflow.errors import UserError
from agentflow.graph import END, Workflow, WorkflowRunner
from agentflow.graph.run.context import RunHandles
from agentflow.runrecord import verified


class State(TypedDict, total=False):
    task: str
    plan: dict[str, Any]
    done: str


def _cassette(path: Path, tokens: int) -> Path:
    plan = json.dumps({"goal": "g", "steps": [{"description": "d"}]})
    reply = {"response": {"choices": [{"message": {"role": "assistant", "content": plan}, "finish_reason": "stop"}],
                          "usage": {"input_tokens": tokens, "output_tokens": 1}, "model": "scripted"}}
    path.write_text(json.dumps({"version": 1, "match": "sequence", "interactions": [reply]}))
    return path


def _workflow(model: str | None = None) -> Any:
    wf = Workflow("two_plans", state=State)
    wf.agent("plan", "planner", output="plan", config={"tools": []})
    wf.agent("replan", "planner", output="plan", config={"tools": []})
    wf.node("finish", lambda s: {"done": "yes"}, writes=["done"])
    wf.edge("plan", "replan").edge("replan", "finish").edge("finish", END)
    wf.interrupt_before = ["replan"]
    spec = wf.spec
    spec.model = model
    return spec


async def test_a_python_run_keeps_its_ledger_across_runners(tmp_path: Path) -> None:
    from agentflow.models.replay import ReplayModel

    run = tmp_path / "run"
    first = RunHandles(chat_model=ReplayModel(_cassette(tmp_path / "a.json", 10)))
    async with WorkflowRunner(_workflow(), run_dir=run, context=first) as runner:
        paused = await runner.start({"task": "t"}, thread_id="th")
    assert paused.status == "interrupted" and paused.usage.model_calls == 1
    record = json.loads((run / "run.json").read_text())
    assert verified(record), record  # the library's own record is signed as the CLI's is (runrecord)
    assert {k: v for k, v in record.items() if k != "mac"} == {
        "run_id": "run", "thread_id": "th", "workflow": "two_plans", "status": "interrupted",
        "stop_reason": "interrupted"}
    assert json.loads((run / "usage.json").read_text())["tokens"] == 11

    second = RunHandles(chat_model=ReplayModel(_cassette(tmp_path / "b.json", 20)))  # another process's leg
    async with WorkflowRunner(_workflow(), run_dir=run, context=second) as runner:
        done = await runner.resume("th", approve=True)
    assert done.status == "done" and done.usage.model_calls == 2 and done.usage.tokens == 11 + 21
    assert done.usage.wall_seconds >= paused.usage.wall_seconds
    assert json.loads((run / "usage.json").read_text())["tokens"] == 32
    assert json.loads((run / "run.json").read_text())["status"] == "done"
    kinds = [json.loads(line)["kind"] for line in (run / "events.jsonl").read_text().splitlines()]
    assert kinds.count("run.start") == 1 and kinds.count("run.resume") == 1 and kinds.count("model.call") == 2


async def test_result_of_a_thread_builds_no_model(tmp_path: Path) -> None:
    from agentflow.models.replay import ReplayModel

    ctx = RunHandles(chat_model=ReplayModel(_cassette(tmp_path / "a.json", 10)))
    async with WorkflowRunner(_workflow(), run_dir=tmp_path, context=ctx) as runner:
        await runner.start({"task": "t"}, thread_id="th")
    # a model that cannot even be built: reading the thread must not try
    async with WorkflowRunner(_workflow("local:no-such-model"), run_dir=tmp_path) as reader:
        paused = await reader.result("th")
        assert paused.status == "interrupted" and paused.next == ["replan"]
        assert reader.context.chat_model is None
        with pytest.raises(UserError, match="unknown local model 'no-such-model'"):
            await reader.resume("th", approve=True)  # running it does build it
