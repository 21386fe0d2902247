"""Record a real (loopback) model to a cassette, replay it deterministically, and miss clearly."""

from __future__ import annotations

import json

import pytest

from agentflow.errors import ReplayMiss, UserError
from agentflow.models.base import ChatRequest, Message, ToolSpec
from agentflow.models.replay import RecordingModel, ReplayModel
from agentflow.models.spec import load_model

from .conftest import CASSETTES


def ask(text: str, **kw: object) -> ChatRequest:
    return ChatRequest(messages=[Message.user(text)], **kw)


async def test_record_then_replay_round_trip(server, fast, tmp_path) -> None:
    path = tmp_path / "run.json"
    server.script({}, {"tool_calls": [{"id": "c1", "name": "ls", "arguments": '{"dir": "."}'}]}, {})
    recorder = RecordingModel(load_model(server.spec(), **fast), path)
    tools = [ToolSpec(name="ls", description="list files")]
    live = [
        await recorder.chat(ask("first", temperature=0)),
        await recorder.chat(ask("second", tools=tools)),
        await recorder.chat(ask("first", temperature=0, n=2)),
    ]
    await recorder.aclose()
    assert len(server.requests()) == 3

    data = json.loads(path.read_text())
    assert data["version"] == 1 and data["match"] == "request" and len(data["interactions"]) == 3

    replay = load_model(f"replay:{path}")
    # request matching: order of calls may differ from the recording
    replayed = [
        await replay.chat(ask("first", temperature=0, n=2)),
        await replay.chat(ask("second", tools=tools)),
        await replay.chat(ask("first", temperature=0)),
    ]
    assert [r.choices for r in replayed] == [live[2].choices, live[1].choices, live[0].choices]
    assert replayed[1].message.tool_calls[0].arguments == {"dir": "."}
    assert all(r.cached for r in replayed)
    assert [r.usage.input_tokens for r in replayed] == [
        live[2].usage.input_tokens,
        live[1].usage.input_tokens,
        live[0].usage.input_tokens,
    ]
    assert len(server.requests()) == 3  # nothing reached the server


async def test_streaming_is_recorded_and_replayed(server, fast, tmp_path) -> None:
    path = tmp_path / "stream.json"
    recorder = RecordingModel(load_model(server.spec(), **fast), path)
    live = [d async for d in recorder.stream(ask("stream me"))][-1].response
    await recorder.aclose()
    replay = ReplayModel(path)
    deltas = [d async for d in replay.stream(ask("stream me"))]
    assert deltas[-1].response is not None and live is not None
    assert deltas[-1].response.text == live.text == "".join(d.text for d in deltas[:-1])


async def test_replay_miss_names_the_call(tmp_path) -> None:
    replay = load_model(f"replay:{CASSETTES / 'hello.json'}")
    assert (await replay.chat(ask("Say hello.", temperature=0))).text == "Hello!"
    with pytest.raises(ReplayMiss) as info:
        await replay.chat(ask("Say something completely different please", temperature=0))
    message = str(info.value)
    assert "call #2" in message and "Say something completely" in message and "\n" not in message
    # the same request twice: the second one has no unused interaction left
    with pytest.raises(ReplayMiss, match="call #3"):
        await replay.chat(ask("Say hello.", temperature=0))
    # a different temperature is a different request
    with pytest.raises(ReplayMiss):
        await replay.chat(ask("Say goodbye.", temperature=0.7))
    assert (await replay.chat(ask("Say goodbye.", temperature=0))).text == "Goodbye!"
    assert isinstance(info.value, UserError)


async def test_sequence_cassette_ignores_requests() -> None:
    replay = ReplayModel(CASSETTES / "scripted_tool_use.json")
    first = await replay.chat(ask("anything at all"))
    assert first.message.tool_calls[0].name == "read_file"
    assert first.choices[0].finish_reason == "tool_calls"
    second = await replay.chat(ask("whatever"))
    assert second.text == "The README describes agentflow."
    with pytest.raises(ReplayMiss, match="no interactions left"):
        await replay.chat(ask("one more"))


async def test_recording_redacts_secrets(server, fast, tmp_path, monkeypatch) -> None:
    secret = "sk-live-very-secret-0123456789"
    monkeypatch.setenv("MYSERVICE_API_KEY", secret)
    path = tmp_path / "secret.json"
    recorder = RecordingModel(load_model(server.spec(), **fast), path)
    response = await recorder.chat(ask(f"my key is {secret}"))
    await recorder.aclose()
    assert secret in response.text  # the live reply echoes it...
    text = path.read_text()
    assert secret not in text and "***" in text  # ...the cassette does not


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", "invalid JSON"),
        ("[" * 100_000 + "]" * 100_000, "invalid JSON: nested too deeply"),
        ('{"version": 1, "interactions": [{"response": {"choices": []}}]}', "needs a 'request'"),
        ('{"version": 2, "interactions": []}', "version 2"),
        ('{"version": 1, "match": "fuzzy", "interactions": []}', "match"),
    ],
)
def test_bad_cassettes_are_user_errors(tmp_path, content, words) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(UserError, match=words):
        ReplayModel(path)


def test_missing_cassette(tmp_path) -> None:
    with pytest.raises(UserError, match="not found"):
        load_model(f"replay:{tmp_path / 'nope.json'}")


def test_a_raw_request_is_keyed_apart_and_a_chat_requests_key_is_as_recorded_before() -> None:
    from agentflow.models.cache import cache_key
    from agentflow.models.replay import request_key

    chat, raw = ask("def f(x):", temperature=0), ask("def f(x):", temperature=0, raw=True)
    assert "raw" not in request_key(chat) and request_key(raw) != request_key(chat)
    assert cache_key("local:m", raw) != cache_key("local:m", chat)


def test_a_raw_request_is_one_user_message_without_tools() -> None:
    from pydantic import ValidationError

    for bad in ({"messages": [Message.system("s"), Message.user("p")]}, {"messages": [Message.assistant("p")]},
                {"messages": [Message.user("p")], "tools": [ToolSpec(name="ls")]}):
        with pytest.raises(ValidationError, match="a raw request is one user message"):
            ChatRequest(raw=True, **bad)
