"""Budgets under concurrency and across threads, with a scripted model and real SQLite checkpoints.

Parallel agent nodes sharing one `Budget(model_calls=K)`: exactly K calls are made and charged, the admitted
agents finish (a refused sibling's failure does not cancel them), the run says which nodes the budget refused
(`errors`, reason `budget:model_calls`, "0 model calls made") and which finished (`finished`), and a resume
runs only the refused ones. Usage is per thread: a new thread in the same run folder starts at zero, and
usage.json keeps each thread's own usage beside the folder's sum."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, TypedDict

import pytest
from pydantic import BaseModel

from agentflow import FunctionModel, RunHandles
from agentflow.budget import Budget
from agentflow.graph.define.builder import Workflow
from agentflow.graph.define.spec import END
from agentflow.graph.run.runner import WorkflowRunner

CALL_S = 0.3
"""How long each model call takes: long enough that every agent asks before any answer."""


class Answer(BaseModel):
    summary: str


class S(TypedDict, total=False):
    task: str
    a0: dict[str, Any]
    a1: dict[str, Any]
    a2: dict[str, Any]
    a3: dict[str, Any]
    a4: dict[str, Any]
    a5: dict[str, Any]
    boom: dict[str, Any]


async def _slow(request: Any) -> Answer:
    await asyncio.sleep(CALL_S)
    return Answer(summary="ok")


def _boom(state: Any) -> dict[str, Any]:
    raise RuntimeError("this node fails at once")


async def _boom_async(state: Any) -> dict[str, Any]:
    raise RuntimeError("this node fails at once")


def _fan_out(agents: int, failing: Any = None) -> Any:
    """`fan` -> `agents` agent nodes at once (and a failing function node beside them) -> `join`."""
    wf = Workflow("fan_out", state=S)
    wf.node("fan", lambda s: {}, writes=[])
    names = [f"a{i}" for i in range(agents)]
    for name in names:
        wf.agent(name, "planner", output=name, config={"tools": []}, output_type=Answer)
    if failing is not None:
        wf.node("boom", failing, writes=["boom"])
        names.append("boom")
    wf.node("join", lambda s: {}, writes=[])
    wf.parallel("fan", names, join="join")
    wf.edge("join", END)
    return wf.start("fan").spec


async def _run(run_dir: Path, spec: Any, limit: int | None, thread: str, *, resume: bool = False) -> Any:
    model = FunctionModel(_slow)
    context = RunHandles(chat_model=model, budget=Budget(model_calls=limit))
    async with WorkflowRunner(spec, run_dir=run_dir, context=context) as runner:
        result = await (runner.resume(thread) if resume else runner.start({"task": "t"}, thread_id=thread))
    return result, len(model.requests)


@pytest.mark.parametrize(("agents", "limit"), [(6, 3), (4, 1), (3, 0), (5, 4), (3, 3), (2, 5)])
async def test_parallel_agents_make_the_calls_admitted_and_say_who_was_refused(
    tmp_path: Path, agents: int, limit: int
) -> None:
    result, calls = await _run(tmp_path, _fan_out(agents), limit, "t1")
    admitted = min(agents, limit)
    assert calls == admitted and result.usage.model_calls == admitted
    assert json.loads((tmp_path / "usage.json").read_text())["threads"]["t1"]["model_calls"] == admitted
    if limit >= agents:
        assert result.status == "done" and not result.errors
        return
    assert (result.status, result.stop_reason, result.limit) == ("failed", "budget:model_calls", "model_calls")
    assert len(result.errors) == agents - admitted and len(result.finished) == admitted
    assert not set(result.errors) & set(result.finished)
    for error in result.errors.values():  # refused, not cancelled; and they made no call
        assert (error.reason, error.limit) == ("budget:model_calls", "model_calls") and "0 model calls made" in error.error, error
    assert result.failed_node in result.errors
    for name in result.finished:
        assert result.state[name] == {"summary": "ok"}  # the admitted agents' answers are in the state


async def test_a_resume_runs_only_the_refused_agents_and_counts_the_thread_on(tmp_path: Path) -> None:
    spec = _fan_out(6)
    first, _ = await _run(tmp_path, spec, 3, "t1")
    assert len(first.errors) == 3
    again, calls = await _run(tmp_path, spec, 6, "t1", resume=True)  # 3 spent + 3 more: within 6
    assert calls == 3 and again.status == "done" and again.usage.model_calls == 6
    assert all(again.state[f"a{i}"] == {"summary": "ok"} for i in range(6))


async def test_a_new_thread_in_the_same_folder_is_not_charged_the_old_threads_usage(tmp_path: Path) -> None:
    spec = _fan_out(2)
    first, _ = await _run(tmp_path, spec, 3, "t1")
    assert first.status == "done" and first.usage.model_calls == 2
    second, calls = await _run(tmp_path, spec, 2, "t2")  # a fresh budget of 2: the old thread's 2 do not count
    assert second.status == "done" and calls == 2 and second.usage.model_calls == 2
    usage = json.loads((tmp_path / "usage.json").read_text())
    assert {t: u["model_calls"] for t, u in usage["threads"].items()} == {"t1": 2, "t2": 2}
    assert usage["model_calls"] == 4  # the folder's sum
    reader_context = RunHandles(chat_model=FunctionModel(_slow))
    async with WorkflowRunner(spec, run_dir=tmp_path, context=reader_context) as reader:  # its own usage
        assert (await reader.result("t1")).usage.model_calls == 2


async def test_one_runner_counts_each_thread_on_its_own(tmp_path: Path) -> None:
    model = FunctionModel(_slow)
    budget = Budget(model_calls=2)
    async with WorkflowRunner(_fan_out(2), run_dir=tmp_path, context=RunHandles(chat_model=model, budget=budget)) as r:
        assert (await r.start({"task": "t"}, thread_id="t1")).usage.model_calls == 2
        second = await r.start({"task": "t"}, thread_id="t2")
        assert second.status == "done" and second.usage.model_calls == 2
        assert (await r.result("t1")).usage.model_calls == 2
    assert len(model.requests) == 4


@pytest.mark.parametrize("failing", [_boom, _boom_async], ids=["sync", "async"])
async def test_a_node_failing_beside_running_agents_does_not_cancel_them(tmp_path: Path, failing: Any) -> None:
    result, calls = await _run(tmp_path, _fan_out(3, failing), None, "t1")
    assert (result.status, result.failed_node) == ("failed", "boom")
    assert calls == 3 and result.usage.model_calls == 3
    assert sorted(result.finished) == ["a0", "a1", "a2"], result.errors
