"""The openai-compatible backend against a real loopback HTTP server process."""

from __future__ import annotations

import asyncio

import pytest

from agentflow.errors import ModelError, UserError
from agentflow.models.backends.retry import ModelUnreachable
from agentflow.models.base import ChatRequest, Message, ToolCall, ToolSpec
from agentflow.models.spec import load_model

WEATHER = ToolSpec(
    name="get_weather",
    description="Weather of a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def ask(text: str, **kw: object) -> ChatRequest:
    return ChatRequest(messages=[Message.system("You are terse."), Message.user(text)], **kw)


async def test_chat_reply_usage_and_request_shape(server, fast) -> None:
    model = load_model(server.spec("tiny-model"), **fast)
    response = await model.chat(ask("hello there", temperature=0.5, seed=7, max_tokens=20, stop=["END"]))
    await model.aclose()
    assert response.text == "echo: hello there"
    assert response.choices[0].finish_reason == "stop"
    assert response.model == "tiny-model"
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert response.usage.cost_usd == 0.0  # a server on loopback is free
    assert response.latency_s > 0
    body = server.requests()[0]["body"]
    assert body["model"] == "tiny-model"
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hello there"},
    ]
    assert (body["temperature"], body["seed"], body["max_tokens"], body["stop"]) == (0.5, 7, 20, ["END"])
    assert "n" not in body and "tools" not in body


async def test_api_key_from_option_env_or_placeholder(server, fast, monkeypatch) -> None:
    monkeypatch.delenv("AGENTFLOW_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for options, expected in [
        ({"api_key": "opt-key-123456"}, "Bearer opt-key-123456"),
        ({}, "Bearer no-key"),
    ]:
        model = load_model(server.spec(), **options, **fast)
        await model.chat(ask("x"))
        await model.aclose()
        assert server.requests()[-1]["headers"]["authorization"] == expected
    monkeypatch.setenv("AGENTFLOW_API_KEY", "env-key-abcdefgh")
    model = load_model(server.spec(), **fast)
    await model.chat(ask("x"))
    await model.aclose()
    assert server.requests()[-1]["headers"]["authorization"] == "Bearer env-key-abcdefgh"


async def test_tool_calls_round_trip(server, fast) -> None:
    server.script(
        {
            "tool_calls": [
                {"id": "call_1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
                {"id": "call_2", "name": "get_weather", "arguments": "{not json"},
            ]
        }
    )
    model = load_model(server.spec(), **fast)
    request = ask("weather in Oslo?", tools=[WEATHER], tool_choice="auto")
    response = await model.chat(request)
    assert response.choices[0].finish_reason == "tool_calls"
    first, second = response.message.tool_calls
    assert first == ToolCall(id="call_1", name="get_weather", arguments={"city": "Oslo"})
    assert second.arguments == {} and second.arguments_error and "not valid JSON" in second.arguments_error
    sent = server.requests()[0]["body"]
    assert sent["tools"] == [{"type": "function", "function": WEATHER.model_dump()}]
    assert sent["tool_choice"] == "auto"

    follow_up = request.model_copy(
        update={
            "messages": [*request.messages, response.message, Message.tool("call_1", "get_weather", "sunny")]
        }
    )
    await model.chat(follow_up)
    await model.aclose()
    messages = server.requests()[1]["body"]["messages"]
    assert messages[2]["role"] == "assistant"
    assert messages[2]["tool_calls"][0] == {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
    }
    assert messages[3] == {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}


async def test_n_samples(server, fast) -> None:
    model = load_model(server.spec(), **fast)
    response = await model.chat(ask("pick", n=3))
    await model.aclose()
    assert [c.message.content for c in response.choices] == [
        "echo: pick #0",
        "echo: pick #1",
        "echo: pick #2",
    ]
    assert server.requests()[0]["body"]["n"] == 3
    assert len(server.requests()) == 1


async def test_streaming_text_and_tool_calls(server, fast) -> None:
    model = load_model(server.spec(), **fast)
    pieces, final = [], None
    async for delta in model.stream(ask("stream this please")):
        if delta.response is not None:
            final = delta.response
        else:
            pieces.append(delta.text)
    assert len(pieces) > 1
    assert final is not None and final.text == "".join(pieces)
    assert final.text.strip() == "echo: stream this please"
    assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0
    assert server.requests()[0]["body"]["stream"] is True

    server.script({"tool_calls": [{"id": "c9", "name": "get_weather", "arguments": '{"city": "Lima"}'}]})
    final = None
    async for delta in model.stream(ask("weather?", tools=[WEATHER])):
        final = delta.response or final
    await model.aclose()
    assert final is not None and final.choices[0].finish_reason == "tool_calls"
    assert final.message.tool_calls == [ToolCall(id="c9", name="get_weather", arguments={"city": "Lima"})]


async def test_transient_failures_are_retried(server, fast) -> None:
    server.script({"status": 503}, {"status": 502}, {"drop": True}, {"content": "finally"})
    model = load_model(server.spec(), max_attempts=4, **fast)
    response = await model.chat(ask("x"))
    await model.aclose()
    assert response.text == "finally"
    assert len(server.requests()) == 4


async def test_streaming_retries_before_first_token(server, fast) -> None:
    server.script({"status": 500}, {"content": "ok then"})
    model = load_model(server.spec(), max_attempts=2, **fast)
    final = None
    async for delta in model.stream(ask("x")):
        final = delta.response or final
    await model.aclose()
    assert final is not None and final.text.strip() == "ok then"
    assert len(server.requests()) == 2


async def test_gives_up_after_max_attempts(server, fast) -> None:
    server.script(*[{"status": 503}] * 5)
    model = load_model(server.spec(), max_attempts=3, **fast)
    with pytest.raises(ModelError) as info:
        await model.chat(ask("x"))
    await model.aclose()
    assert "HTTP 503" in str(info.value) and "gave up after 3 attempts" in str(info.value)
    assert not isinstance(info.value, UserError)
    assert len(server.requests()) == 3


async def test_429_honours_retry_after(server, fast) -> None:
    server.script({"status": 429, "headers": {"Retry-After": "1"}}, {"content": "after waiting"})
    model = load_model(server.spec(), **fast)  # backoff alone would wait ~0.01 s
    response = await model.chat(ask("x"))
    await model.aclose()
    assert response.text == "after waiting"
    first, second = server.requests()
    assert second["t"] - first["t"] >= 0.9


@pytest.mark.parametrize(
    ("status", "error", "words"),
    [
        (401, UserError, ["API key was rejected", "AGENTFLOW_API_KEY"]),
        (404, UserError, ["not found", "check the model name"]),
        (400, ModelError, ["request rejected (HTTP 400)", "scripted 400"]),
    ],
)
async def test_non_transient_errors_fail_at_once(server, fast, status, error, words) -> None:
    server.script({"status": status}, {"content": "must not be reached"})
    model = load_model(server.spec(), max_attempts=4, **fast)
    with pytest.raises(error) as info:
        await model.chat(ask("x"))
    await model.aclose()
    message = str(info.value)
    assert "\n" not in message and all(w in message for w in words), message
    assert len(server.requests()) == 1
    if status == 400:
        assert not isinstance(info.value, UserError)


async def test_unreachable_server(fast) -> None:
    model = load_model("openai-compatible:http://127.0.0.1:1/v1#m", max_attempts=2, **fast)
    with pytest.raises(ModelUnreachable) as info:
        await model.chat(ask("x"))
    await model.aclose()
    assert "connection failed" in str(info.value) and "gave up after 2 attempts" in str(info.value)


async def test_timeout_is_transient(server) -> None:
    server.script({"delay": 1.5}, {"content": "quick"})
    model = load_model(server.spec(), timeout_s=0.5, retry_initial_s=0.01, max_attempts=2)
    response = await model.chat(ask("x"))
    await model.aclose()
    assert response.text == "quick"


async def test_concurrency_limit(server, fast) -> None:
    server.script(*[{"delay": 0.3, "content": f"r{i}"} for i in range(6)])
    model = load_model(server.spec(), concurrency=2, **fast)
    responses = await asyncio.gather(*(model.chat(ask(f"q{i}")) for i in range(6)))
    await model.aclose()
    assert sorted(r.text for r in responses) == [f"r{i}" for i in range(6)]
    assert server.log()["max_inflight"] == 2


def test_one_model_object_across_event_loops(server, fast) -> None:
    model = load_model(server.spec(), concurrency=1, **fast)

    async def burst() -> list[str]:
        return [r.text for r in await asyncio.gather(*(model.chat(ask(f"q{i}")) for i in range(3)))]

    assert asyncio.run(burst()) == ["echo: q0", "echo: q1", "echo: q2"]
    assert asyncio.run(burst()) == ["echo: q0", "echo: q1", "echo: q2"]
    assert server.log()["max_inflight"] == 1


async def test_openai_scheme_uses_max_completion_tokens_and_prices(server, fast, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-test-424242")
    model = load_model("openai:gpt-4o-mini", base_url=server.openai_url, **fast)
    response = await model.chat(ask("hi", max_tokens=12, tool_choice="auto"))
    body = server.requests()[0]["body"]
    assert body["max_completion_tokens"] == 12 and "max_tokens" not in body
    assert "tool_choice" not in body  # no tools, so no tool_choice
    usage = response.usage
    assert usage.cost_usd == pytest.approx((usage.input_tokens * 0.15 + usage.output_tokens * 0.60) / 1e6)
    server.script({"status": 401})
    with pytest.raises(UserError, match="set OPENAI_API_KEY"):
        await model.chat(ask("again"))
    await model.aclose()
