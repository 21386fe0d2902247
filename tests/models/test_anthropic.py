"""The anthropic backend (AsyncAnthropic) pointed at the loopback server's Messages API subset."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from agentflow.errors import ModelError, UserError
from agentflow.models.base import ChatRequest, Message, ToolCall, ToolSpec
from agentflow.models.spec import load_model
from agentflow.models.structured import chat_structured

WEATHER = ToolSpec(
    name="get_weather",
    description="Weather of a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.fixture
def anthropic_model(server, fast):
    def make(**options: object):
        return load_model(
            "anthropic:claude-haiku-4-5",
            base_url=server.root,
            api_key="sk-ant-test-000111",
            **{**fast, **options},
        )

    return make


async def test_system_prompt_is_separate_and_cost_is_priced(server, anthropic_model) -> None:
    model = anthropic_model()
    response = await model.chat(
        ChatRequest(
            messages=[Message.system("Be brief."), Message.user("hi")], temperature=0.2, stop=["\n\n"]
        )
    )
    await model.aclose()
    assert response.text == "echo: hi"
    assert response.choices[0].finish_reason == "stop"
    body = server.requests()[0]["body"]
    assert server.requests()[0]["path"] == "/v1/messages"
    headers = server.requests()[0]["headers"]  # SDK versions differ: x-api-key or a bearer token
    assert "sk-ant-test-000111" in (headers.get("x-api-key", "") + headers.get("authorization", ""))
    assert body["system"] == "Be brief."
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert body["max_tokens"] == 4096 and body["temperature"] == 0.2 and body["stop_sequences"] == ["\n\n"]
    usage = response.usage
    assert usage.cost_usd == pytest.approx((usage.input_tokens * 1.00 + usage.output_tokens * 5.00) / 1e6)


async def test_tool_use_and_tool_result_blocks(server, anthropic_model) -> None:
    server.script({"tool_calls": [{"id": "toolu_1", "name": "get_weather", "arguments": '{"city": "Rome"}'}]})
    model = anthropic_model()
    request = ChatRequest(
        messages=[Message.user("weather in Rome?")], tools=[WEATHER], tool_choice="required"
    )
    response = await model.chat(request)
    assert response.choices[0].finish_reason == "tool_calls"
    assert response.message.tool_calls == [
        ToolCall(id="toolu_1", name="get_weather", arguments={"city": "Rome"})
    ]
    sent = server.requests()[0]["body"]
    assert sent["tools"] == [
        {"name": "get_weather", "description": "Weather of a city", "input_schema": WEATHER.parameters}
    ]
    assert sent["tool_choice"] == {"type": "any"}

    follow_up = request.model_copy(
        update={
            "messages": [
                *request.messages,
                response.message,
                Message.tool("toolu_1", "get_weather", "warm"),
                Message.user("thanks"),
            ]
        }
    )
    await model.chat(follow_up)
    await model.aclose()
    messages = server.requests()[1]["body"]["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Rome"}}],
    }
    assert messages[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "warm"},
            {"type": "text", "text": "thanks"},
        ],
    }


async def test_n_samples_are_concurrent_single_calls(server, anthropic_model) -> None:
    model = anthropic_model()
    response = await model.chat(ChatRequest(messages=[Message.user("pick")], n=3))
    await model.aclose()
    assert len(response.choices) == 3
    assert len(server.requests()) == 3
    assert all("n" not in r["body"] for r in server.requests())
    assert response.usage.input_tokens == 3 * (response.usage.input_tokens // 3)


async def test_streaming(server, anthropic_model) -> None:
    model = anthropic_model()
    pieces, final = [], None
    async for delta in model.stream(ChatRequest(messages=[Message.user("tell me more")])):
        if delta.response is not None:
            final = delta.response
        else:
            pieces.append(delta.text)
    server.script({"tool_calls": [{"id": "toolu_2", "name": "get_weather", "arguments": '{"city": "Bern"}'}]})
    tool_final = None
    async for delta in model.stream(ChatRequest(messages=[Message.user("weather?")], tools=[WEATHER])):
        tool_final = delta.response or tool_final
    await model.aclose()
    assert final is not None and final.text == "".join(pieces) and len(pieces) > 1
    assert final.text.strip() == "echo: tell me more"
    assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0
    assert tool_final is not None
    assert tool_final.message.tool_calls == [
        ToolCall(id="toolu_2", name="get_weather", arguments={"city": "Bern"})
    ]


async def test_overloaded_is_retried_and_bad_key_is_a_user_error(server, anthropic_model) -> None:
    server.script(
        {"status": 529, "body": {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}},
        {"content": "back"},
    )
    model = anthropic_model()
    assert (await model.chat(ChatRequest(messages=[Message.user("x")]))).text == "back"
    server.script(
        {
            "status": 401,
            "body": {
                "type": "error",
                "error": {"type": "authentication_error", "message": "invalid x-api-key"},
            },
        }
    )
    with pytest.raises(UserError, match="ANTHROPIC_API_KEY"):
        await model.chat(ChatRequest(messages=[Message.user("x")]))
    await model.aclose()
    assert len(server.requests()) == 3


async def test_missing_key_is_a_user_error(monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    model = load_model("anthropic:claude-haiku-4-5")
    with pytest.raises(UserError, match="set ANTHROPIC_API_KEY"):
        await model.chat(ChatRequest(messages=[Message.user("x")]))


class Answer(BaseModel):
    answer: int
    reason: str


async def test_structured_output_via_prompt(server, anthropic_model) -> None:
    server.script({"content": 'Sure!\n```json\n{"answer": 4, "reason": "2+2"}\n```'})
    model = anthropic_model()
    value, response = await chat_structured(model, ChatRequest(messages=[Message.user("2+2?")]), Answer)
    await model.aclose()
    assert value == Answer(answer=4, reason="2+2")
    system = server.requests()[0]["body"]["system"]
    assert "JSON schema" in system and '"answer"' in system
    assert response.usage.input_tokens > 0


def test_model_error_is_not_user_error() -> None:
    assert not issubclass(ModelError, UserError)


async def test_a_raw_prompt_is_refused_before_any_request(server, anthropic_model) -> None:
    model = anthropic_model()
    request = ChatRequest(messages=[Message.user("<|fim_prefix|>def f(")], raw=True)
    with pytest.raises(UserError, match="no text-completion endpoint") as caught:
        await model.chat(request)
    with pytest.raises(UserError, match="no text-completion endpoint"):
        [delta async for delta in model.stream(request)]
    await model.aclose()
    assert "OpenAI-compatible server" in (caught.value.hint or "") and server.requests() == []
