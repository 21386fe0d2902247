"""Spec strings, options, lazily imported backends and the price table."""

from __future__ import annotations

import sys

import pytest

from agentflow.errors import DependencyMissing, UserError
from agentflow.models.base import ChatModel, Usage
from agentflow.models.pricing import cost_usd, lookup_price
from agentflow.models.spec import ACCEPTED, load_model, parse_spec


@pytest.mark.parametrize(
    ("spec", "scheme", "model", "base_url"),
    [
        ("openai:gpt-4o-mini", "openai", "gpt-4o-mini", None),
        ("anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", None),
        (
            "openai-compatible:http://127.0.0.1:8080/v1#qwen",
            "openai-compatible",
            "qwen",
            "http://127.0.0.1:8080/v1",
        ),
        (
            "openai-compatible:https://host.example/v1/#org/model",
            "openai-compatible",
            "org/model",
            "https://host.example/v1",
        ),
        ("litellm:groq/llama-3.1-8b", "litellm", "groq/llama-3.1-8b", None),
        ("local:gemma3-270m", "local", "gemma3-270m", None),
        ("replay:tests/x.json", "replay", "tests/x.json", None),
    ],
)
def test_parse_good_specs(spec: str, scheme: str, model: str, base_url: str | None) -> None:
    parsed = parse_spec(spec)
    assert (parsed.scheme, parsed.model, parsed.base_url) == (scheme, model, base_url)


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("gpt-4o", "missing 'SCHEME:'"),
        ("openia:gpt-4o", "unknown scheme 'openia'"),
        ("openai:", "missing model name"),
        ("replay:", "missing PATH"),
        ("openai-compatible:http://127.0.0.1:8080/v1", "missing '#MODEL'"),
        ("openai-compatible:http://127.0.0.1:8080/v1#", "missing model name after '#'"),
        ("openai-compatible:127.0.0.1:8080#m", "is not an http(s) URL"),
        ("openai-compatible:http://127.0.0.1:99999999/v1#m", "malformed port"),
        ("litellm:gpt-4o", "PROVIDER/MODEL"),
    ],
)
def test_bad_specs_are_one_line_user_errors(spec: str, why: str) -> None:
    with pytest.raises(UserError) as info:
        load_model(spec)
    message = str(info.value)
    assert why in message and ACCEPTED in message and "\n" not in message


def test_unknown_or_invalid_option_is_a_user_error() -> None:
    with pytest.raises(UserError, match="concurrancy"):
        load_model("openai:gpt-4o", concurrancy=3)
    with pytest.raises(UserError, match="max_attempts"):
        load_model("openai:gpt-4o", max_attempts=0)


def test_backends_satisfy_the_protocol_without_network() -> None:
    for spec in (
        "openai:gpt-4o-mini",
        "anthropic:claude-haiku-4-5",
        "openai-compatible:http://127.0.0.1:9/v1#m",
    ):
        model = load_model(spec)
        assert isinstance(model, ChatModel) and model.spec == spec


async def test_openai_without_key_is_a_user_error(monkeypatch) -> None:
    from agentflow.models.base import ChatRequest, Message

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = load_model("openai:gpt-4o-mini")
    with pytest.raises(UserError, match="set OPENAI_API_KEY"):
        await model.chat(ChatRequest(messages=[Message.user("x")]))


def test_litellm_missing_is_dependency_missing(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)  # as if the extra were not installed
    with pytest.raises(DependencyMissing, match=r"agentflow\[litellm\]"):
        load_model("litellm:groq/llama-3.1-8b")


def test_local_missing_is_a_user_error(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "agentflow.models.backends.local", None)
    with pytest.raises(UserError, match="local models are not available"):
        load_model("local:gemma3-270m")


def test_replay_takes_no_options(tmp_path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"version": 1, "interactions": []}')
    with pytest.raises(UserError, match="no options"):
        load_model(f"replay:{path}", concurrency=2)


def test_prices() -> None:
    assert lookup_price("gpt-4o-mini-2024-07-18") == (0.15, 0.60)  # longest prefix wins over gpt-4o
    assert lookup_price("gpt-4o-2024-08-06") == (2.50, 10.00)
    assert lookup_price("anthropic/claude-3-5-haiku-latest") == (0.80, 4.00)
    assert lookup_price("my-finetune") is None
    usage = Usage(input_tokens=1_000_000, output_tokens=500_000)
    assert cost_usd(usage, (2.0, 8.0)) == pytest.approx(6.0)
    assert cost_usd(usage, None) is None
