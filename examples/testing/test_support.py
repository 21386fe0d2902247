"""The support desk's own test suite: no provider, no network, no cassettes.

`TestModel` checks the wiring (every tool offered is called with arguments its schema allows, the answer
validates); `FunctionModel` plays a scripted conversation so the test can assert what the app did. The
tests are plain synchronous functions: `run_sync` runs the agent or the workflow.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from support import Deps, Triage, open_db, support_agent, support_workflow

from agentflow import FunctionModel, RunHandles, TestModel, WorkflowRunner, tool_call
from agentflow.errors import ModelError
from agentflow.models import ChatRequest


@pytest.fixture
def deps() -> Iterator[Deps]:
    db = open_db()
    db.execute("insert into customers (id, email, name) values (7, 'ada@example.com', 'Ada')")
    yield Deps(db=db)
    db.close()


def scripted_support(request: ChatRequest) -> object:
    """A model that does what a good one would: look the sender up, open a ticket, answer."""
    results = [m for m in request.messages if m.role == "tool"]
    if not results:
        sender = re.search(r"[\w.]+@[\w.]+\w", request.messages[-1].content or "")
        return tool_call("find_customer", email=sender.group() if sender else "")
    if len(results) == 1:
        customer = json.loads(results[0].content)
        return tool_call("open_ticket", customer_id=customer["id"], summary="cannot log in", priority="urgent")
    ticket_id = int(results[1].content.split()[1])
    return Triage(ticket_id=ticket_id, priority="urgent", reply="We are on it.")


def test_every_tool_is_wired(deps: Deps) -> None:
    model = TestModel()
    result = support_agent(model).run_sync("I cannot log in", deps=deps)

    assert result.ok, result.error
    assert sorted(t.name for t in model.requests[0].tools) == ["find_customer", "open_ticket"]
    called = [c.name for m in result.messages for c in m.tool_calls]
    assert sorted(called) == ["find_customer", "open_ticket"]  # each once
    assert deps.db.execute("select count(*) from tickets").fetchone() == (1,)
    assert isinstance(result.output, Triage)


def test_an_urgent_ticket_is_opened_for_the_sender(deps: Deps) -> None:
    result = support_agent(FunctionModel(scripted_support)).run_sync(
        "From ada@example.com: I cannot log in since this morning", deps=deps
    )

    assert result.ok, result.error
    assert result.output == Triage(ticket_id=1, priority="urgent", reply="We are on it.")
    assert deps.db.execute("select customer_id, priority from tickets").fetchall() == [(7, "urgent")]


def test_a_model_outage_is_reported_not_raised(deps: Deps) -> None:
    def down(request: ChatRequest) -> str:
        raise ModelError("provider unavailable")

    result = support_agent(FunctionModel(down)).run_sync("hello", deps=deps)

    assert not result.ok and result.error_kind == "model_error" and "unavailable" in (result.error or "")


def test_the_desk_queues_the_reply_and_pages_on_call(deps: Deps) -> None:
    context = RunHandles(chat_model=FunctionModel(scripted_support))
    with WorkflowRunner(support_workflow(), checkpointer="memory", context=context, deps=deps) as runner:
        run = runner.run_sync({"message": "From ada@example.com: the site is down for me"})

    assert run.status == "done", run.errors
    assert run.state["queued"] is True
    assert deps.outbox == ["We are on it."] and deps.paged == [1]


def test_the_whole_desk_runs_on_the_test_model(deps: Deps) -> None:
    context = RunHandles(chat_model=TestModel())
    with WorkflowRunner(support_workflow(), checkpointer="memory", context=context, deps=deps) as runner:
        run = runner.run_sync({"message": "anything"})

    assert run.status == "done", run.errors
    assert len(deps.outbox) == 1
