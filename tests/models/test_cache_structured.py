"""The SQLite response cache and structured output, against the loopback server."""

from __future__ import annotations

import sqlite3

import pytest
from pydantic import BaseModel

from agentflow.models.base import ChatRequest, Message
from agentflow.models.spec import load_model
from agentflow.models.structured import NoJSONError, StructuredOutputError, chat_structured, extract_json


def ask(text: str, **kw: object) -> ChatRequest:
    return ChatRequest(messages=[Message.user(text)], **kw)


async def test_cache_serves_deterministic_calls_only(server, fast, tmp_path) -> None:
    db = tmp_path / "cache.sqlite"
    model = load_model(server.spec(), cache=str(db), **fast)
    first = await model.chat(ask("cache me", temperature=0))
    again = await model.chat(ask("cache me", temperature=0))
    assert not first.cached and again.cached
    assert again.text == first.text and again.usage.input_tokens == first.usage.input_tokens
    assert again.usage.cost_usd == 0.0
    seeded = [await model.chat(ask("seeded", seed=3, temperature=0.9)) for _ in range(2)]
    assert [r.cached for r in seeded] == [False, True]
    sampled = [await model.chat(ask("cache me")) for _ in range(2)]  # default temperature: not cached
    assert not any(r.cached for r in sampled)
    await model.chat(ask("cache me", temperature=0, max_tokens=5))  # a different request misses
    streamed = [d async for d in model.stream(ask("cache me", temperature=0))]
    assert streamed[-1].response is not None and streamed[-1].response.cached
    assert "".join(d.text for d in streamed[:-1]) == first.text
    await model.aclose()
    assert len(server.requests()) == 5
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == 3

    # a new model object on the same file (another process, a later run) is served from it
    other = load_model(server.spec(), cache=str(db), **fast)
    assert (await other.chat(ask("cache me", temperature=0))).cached
    await other.aclose()
    # ... but not a different spec
    renamed = load_model(server.spec("other-model"), cache=str(db), **fast)
    assert not (await renamed.chat(ask("cache me", temperature=0))).cached
    await renamed.aclose()


async def test_cache_force(server, fast, tmp_path) -> None:
    model = load_model(server.spec(), cache=str(tmp_path / "c.sqlite"), cache_force=True, **fast)
    responses = [await model.chat(ask("anything", temperature=1.0)) for _ in range(2)]
    await model.aclose()
    assert [r.cached for r in responses] == [False, True]
    assert len(server.requests()) == 1


class Plan(BaseModel):
    steps: list[str]
    done: bool


async def test_structured_uses_json_schema_mode(server, fast) -> None:
    server.script({"content": '{"steps": ["read", "edit"], "done": false}'})
    model = load_model(server.spec(), **fast)
    plan, response = await chat_structured(model, ask("plan it"), Plan)
    await model.aclose()
    assert plan == Plan(steps=["read", "edit"], done=False)
    fmt = server.requests()[0]["body"]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Plan"
    assert fmt["json_schema"]["schema"]["properties"].keys() == {"steps", "done"}
    assert response.usage.output_tokens > 0


async def test_structured_retries_once_with_the_validation_error(server, fast) -> None:
    server.script(
        {"content": '{"steps": "not a list"}'}, {"content": '```json\n{"steps": [], "done": true}\n```'}
    )
    model = load_model(server.spec(), **fast)
    plan, response = await chat_structured(model, ask("plan it"), Plan)
    await model.aclose()
    assert plan == Plan(steps=[], done=True)
    retry_messages = server.requests()[1]["body"]["messages"]
    assert retry_messages[1] == {"role": "assistant", "content": '{"steps": "not a list"}'}
    assert "did not validate" in retry_messages[2]["content"] and "steps" in retry_messages[2]["content"]
    first_usage = server.requests()[0]  # usage of both calls is summed
    assert response.usage.input_tokens > len(first_usage["body"]["messages"])


async def test_structured_gives_up_with_a_clear_error(server, fast) -> None:
    server.script({"content": "I cannot do that."}, {"content": '{"done": "maybe"}'})
    model = load_model(server.spec(), **fast)
    with pytest.raises(StructuredOutputError) as info:
        await chat_structured(model, ask("plan it"), Plan)
    await model.aclose()
    assert "does not match Plan" in str(info.value) and "steps" in str(info.value)
    assert len(server.requests()) == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('Here you go:\n```json\n{"a": 1}\n```\nThanks', {"a": 1}),
        ("```\n[1, 2]\n```", [1, 2]),
        ('Result: {"a": {"b": 2}} -- done', {"a": {"b": 2}}),
        ("the list: [1, 2] -- done", [1, 2]),
        ('Fill {x} in:\n```json\n{"a": 3}\n```', {"a": 3}),
        ("  42  ", 42),
    ],
)
def test_extract_json(text: str, expected: object) -> None:
    assert extract_json(text) == expected


@pytest.mark.parametrize("text", ["", "no json here", "{broken", "```json\n{oops\n```"])
def test_extract_json_names_the_problem(text: str) -> None:
    with pytest.raises(NoJSONError, match="no JSON object"):
        extract_json(text)
