"""Embedding agents in an app: `run_stream` yields tokens as a real HTTP backend streams them, a callback
observes steps without a ToolContext, `output_type` takes a class, failures are typed on AgentResult, and a
reply cut by max_tokens is asked again with a larger limit or reported as cut."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from agentflow.agents import Agent, AgentEvent
from agentflow.models.spec import load_model
from agentflow.tools import ToolRegistry, tool

from ..models.conftest import FakeServer, fake_server_process

FAST = {"retry_initial_s": 0.01, "retry_max_wait_s": 0.5, "timeout_s": 10, "max_attempts": 1}


class Weather(BaseModel):
    city: str
    celsius: float


@tool
def thermometer(city: str) -> str:
    """Read the temperature of a city.

    Args:
        city: the city.
    """
    return f"{city}: 21.5 C"


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeServer]:
    with fake_server_process() as server:
        yield server


def _agent(server: FakeServer, **config: object) -> Agent:
    cfg = {"name": "weather", "tools": [], "output_retries": 0, **config}
    return Agent(cfg, model=load_model(server.spec("tiny"), **FAST),  # type: ignore[arg-type]
                 tools=ToolRegistry([thermometer]), output_type=Weather)


ANSWER = json.dumps({"city": "Lyon", "celsius": 21.5})


async def test_run_stream_yields_tokens_steps_and_the_result(llm: FakeServer) -> None:
    llm.reset()
    llm.script({"tool_calls": [{"id": "t1", "name": "thermometer", "arguments": '{"city": "Lyon"}'}]},
               {"content": f"The answer is {ANSWER}"})
    events = [e async for e in _agent(llm).run_stream("weather in Lyon?")]
    tokens = [e.text for e in events if e.kind == "token"]
    assert len(tokens) > 3  # streamed piece by piece, not as one block
    assert ANSWER.replace(" ", "") in "".join(tokens).replace(" ", "")
    assert [e.kind for e in events if e.kind != "token"] == ["step", "tool", "step", "result"]
    tool_event = next(e for e in events if e.kind == "tool")
    assert tool_event.tool == "thermometer" and tool_event.ok and "21.5" in tool_event.text
    result = events[-1].result
    assert result is not None and result.ok and result.output == Weather(city="Lyon", celsius=21.5)
    assert result.error_kind is None


async def test_on_event_callback_without_a_tool_context(llm: FakeServer) -> None:
    llm.reset()
    llm.script({"content": ANSWER})
    seen: list[AgentEvent] = []
    result = await _agent(llm).run("weather?", on_event=seen.append)
    assert result.ok and [e.kind for e in seen] == ["step", "result"] and seen[-1].result is result


async def test_failures_are_typed(llm: FakeServer) -> None:
    llm.reset()
    llm.script({"content": "sunny, I think"})
    bad = await _agent(llm).run("weather?")
    assert bad.error_kind == "bad_output" and not bad.ok

    llm.script({"tool_calls": [{"id": "t1", "name": "thermometer", "arguments": '{"city": "Lyon"}'}]})
    limited = await _agent(llm, step_limit=1).run("weather?")
    assert limited.stop_reason == "step_limit" and limited.error_kind == "limit"

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gone = Agent({"name": "w", "tools": []}, model=load_model(f"openai-compatible:http://127.0.0.1:{port}/v1#m",
                                                              **FAST), output_type=Weather)
    unreachable = await gone.run("weather?")
    assert unreachable.error_kind == "model_error" and unreachable.stop_reason == "error"


async def test_a_reply_cut_by_max_tokens_is_asked_again_larger(llm: FakeServer) -> None:
    llm.reset()
    llm.script({"content": ANSWER[:12], "finish_reason": "length"}, {"content": ANSWER})
    result = await _agent(llm, max_tokens=8).run("weather?")
    assert result.ok
    sent = [r["body"]["max_tokens"] for r in llm.requests() if "max_tokens" in r["body"]]
    assert sent == [8, 16]

    llm.reset()
    llm.script({"content": ANSWER[:12], "finish_reason": "length"})
    cut = await _agent(llm).run("weather?")  # no limit of ours to raise: the server's own cut it
    assert cut.error_kind == "output_cut" and "cut at the token limit" in (cut.error or "")


async def test_a_usd_limit_on_an_unpriced_model_warns_once(llm: FakeServer) -> None:
    from agentflow.budget import Budget

    llm.reset()
    llm.script({"content": ANSWER}, {"content": ANSWER})
    # an OpenAI model name with no price (a loopback openai-compatible server is priced at $0, so not that)
    model = load_model("openai:no-such-model", base_url=llm.openai_url, api_key="sk-test-unpriced", **FAST)
    agent = Agent({"name": "w", "tools": []}, model=model, output_type=Weather)
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            await agent.run("weather?", budget=Budget(usd=0.01))
    assert len([w for w in caught if "cannot trip" in str(w.message)]) == 1
