"""Hard budgets against a real, slow OpenAI-compatible server on loopback (tests/models/fake_llm_server.py):
a call is admitted before it starts, so agents sharing one Budget never start more model or tool calls than
its limit, however many run at once; the wall-clock limit cuts a model or tool call in flight."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import openai  # noqa: F401 - up front: its first import blocks the event loop (seconds when busy), no deadline fires
import pytest

from agentflow.agents import Agent
from agentflow.budget import Budget, BudgetExceeded
from agentflow.events import EventLog
from agentflow.models.spec import load_model
from agentflow.tools import ToolContext, ToolRegistry, tool

from ..models.conftest import FakeServer, fake_server_process

FAST = {"retry_initial_s": 0.01, "retry_max_wait_s": 0.5, "timeout_s": 60, "max_attempts": 1}


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeServer]:
    with fake_server_process() as server:
        yield server


def _agent(server: FakeServer, tools: ToolRegistry | None = None) -> Agent:
    config = {"name": "worker", "tools": [], "output_retries": 0, "step_limit": 10}
    return Agent(config, model=load_model(server.spec("tiny"), **FAST), tools=tools)  # type: ignore[arg-type]


def _model_requests(server: FakeServer) -> int:
    return sum(1 for r in server.requests() if r["path"].endswith("/chat/completions"))


async def test_six_concurrent_agents_make_exactly_the_three_model_calls_allowed(llm: FakeServer) -> None:
    llm.reset()
    llm.script(*[{"content": "done", "delay": 0.5} for _ in range(6)])  # slow: all six ask before any answer
    budget = Budget(model_calls=3)
    agent = _agent(llm)
    results = await asyncio.gather(*(agent.run(f"task {i}", budget=budget) for i in range(6)))
    assert _model_requests(llm) == 3  # the server counted them
    assert budget.used.model_calls == 3
    assert sorted(r.stop for r in results) == ["budget:model_calls"] * 3 + ["done"] * 3
    assert all(r.error_kind == "limit" for r in results if not r.ok)


async def test_six_concurrent_agents_run_exactly_the_three_tool_calls_allowed(llm: FakeServer) -> None:
    runs: list[str] = []

    @tool
    async def record(note: str) -> str:
        """Record a note (slowly).

        Args:
            note: what to record.
        """
        runs.append(note)
        await asyncio.sleep(0.3)  # calls overlap: a limit charged only after the call would let all six run
        return "recorded"

    llm.reset()
    call = {"tool_calls": [{"id": "t1", "name": "record", "arguments": '{"note": "x"}'}]}
    llm.script(*[call for _ in range(20)])  # every reply asks for the tool again
    budget = Budget(tool_calls=3)
    agent = _agent(llm, ToolRegistry([record]))
    results = await asyncio.gather(*(agent.run(f"task {i}", budget=budget) for i in range(6)))
    assert len(runs) == 3 and budget.used.tool_calls == 3
    assert {(r.stop_reason, r.limit) for r in results} == {("budget", "tool_calls")}


async def test_the_wall_clock_limit_cuts_a_model_call_in_flight(llm: FakeServer) -> None:
    llm.reset()
    llm.script({"content": "too late", "delay": 10})
    log = EventLog()
    budget = Budget(wall_seconds=2)
    result = await _agent(llm).run("answer slowly", ctx=ToolContext(events=log), budget=budget)
    elapsed = budget.used.wall_seconds
    assert (result.stop_reason, result.limit, result.error_kind) == ("budget", "wall_seconds", "limit")
    assert elapsed < 2.5, f"the run ended {elapsed:.2f}s after the budget started"
    assert _model_requests(llm) == 1  # the call was made, then cut
    assert result.usage.model_calls == 0  # a cut call is not charged
    assert [e.data["kind"] for e in log.events if e.kind == "budget.exceeded"] == ["wall_seconds"]


async def test_the_wall_clock_limit_cuts_a_tool_call_in_flight(llm: FakeServer) -> None:
    @tool
    async def build() -> str:
        """Build the project (takes a while)."""
        await asyncio.sleep(10)
        return "built"

    llm.reset()
    llm.script({"tool_calls": [{"id": "t1", "name": "build", "arguments": "{}"}]})
    budget = Budget(wall_seconds=2)
    started = time.monotonic()
    result = await _agent(llm, ToolRegistry([build])).run("build it", budget=budget)
    assert (result.stop_reason, result.limit, result.stop) == ("budget", "wall_seconds", "budget:wall_seconds")
    assert time.monotonic() - started < 2.5
    last = result.messages[-1]
    assert last.role == "tool" and "not run: the agent stopped (budget:wall_seconds)" in (last.content or "")


async def test_held_calls_count_against_a_parent_and_are_released_when_cut() -> None:
    parent = Budget(model_calls=2)
    child = parent.child()
    with child.model_call(), parent.model_call():
        with pytest.raises(BudgetExceeded) as refused, child.model_call():
            pass
        assert refused.value.kind == "model_calls"
    with child.model_call() as hold:  # both holds were given back: nothing was charged
        hold.charge_model(tokens=10)
    assert (parent.used.model_calls, parent.used.tokens) == (1, 10)


def test_a_token_limit_counts_the_max_tokens_of_calls_in_flight() -> None:
    budget = Budget(tokens=1000)
    with budget.model_call(max_tokens=600), budget.model_call(max_tokens=500):  # 600 held: below, admitted
        with pytest.raises(BudgetExceeded) as refused, budget.model_call(max_tokens=10):  # 1100 held: refused
            pass
        assert refused.value.kind == "tokens"
    with budget.model_call(max_tokens=600) as hold:  # the holds were given back when their calls ended
        hold.charge_model(tokens=1000)
    with pytest.raises(BudgetExceeded), budget.model_call():  # the limit is reached: no call starts
        pass
