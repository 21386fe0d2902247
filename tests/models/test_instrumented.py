"""InstrumentedModel charges a Budget and writes model.call events (replayed model: determinism is the point)."""

from __future__ import annotations

import pytest

from agentflow.budget import Budget, BudgetExceeded
from agentflow.events import EventLog, read_events
from agentflow.models.base import ChatRequest, Message
from agentflow.models.instrumented import InstrumentedModel
from agentflow.models.replay import ReplayModel
from agentflow.models.spec import load_model

from .conftest import CASSETTES


async def test_budget_and_events(tmp_path) -> None:
    budget = Budget(tokens=100)
    events_path = tmp_path / "events.jsonl"
    with EventLog(events_path, run_id="r1") as events:
        model = InstrumentedModel(
            ReplayModel(CASSETTES / "scripted_tool_use.json"), budget=budget, events=events, node_id="coder"
        )
        await model.chat(ChatRequest(messages=[Message.user("go")]))
        async for _ in model.with_node("critic").stream(ChatRequest(messages=[Message.user("go on")], n=1)):
            pass
    used = budget.used
    assert (used.tokens, used.model_calls) == (40 + 12 + 80 + 8, 2)
    assert budget.exceeded() == "tokens"
    calls = [e for e in read_events(events_path) if e.kind == "model.call"]
    assert [e.node_id for e in calls] == ["coder", "critic"]
    assert calls[0].run_id == "r1"
    assert calls[0].data["usage"]["input_tokens"] == 40 and calls[0].data["n"] == 1
    assert calls[0].data["spec"].startswith("replay:") and calls[0].data["cached"] is True


async def test_usd_is_charged_from_a_real_call(server, fast) -> None:
    budget = Budget()
    model = InstrumentedModel(
        load_model(server.spec(), price_in_per_mtok=1.0, price_out_per_mtok=2.0, **fast), budget=budget
    )
    response = await model.chat(ChatRequest(messages=[Message.user("price me")]))
    await model.aclose()
    expected = (response.usage.input_tokens * 1.0 + response.usage.output_tokens * 2.0) / 1e6
    assert response.usage.cost_usd == pytest.approx(expected)
    assert budget.used.usd == pytest.approx(expected)


async def test_a_call_over_the_limit_is_refused() -> None:
    budget = Budget(model_calls=1)
    model = InstrumentedModel(ReplayModel(CASSETTES / "scripted_tool_use.json"), budget=budget)
    await model.chat(ChatRequest(messages=[Message.user("one")]))
    with pytest.raises(BudgetExceeded):
        await model.chat(ChatRequest(messages=[Message.user("two")]))
