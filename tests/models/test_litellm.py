"""The litellm backend against the loopback server (`make setup` installs the litellm extra, so this runs)."""

from __future__ import annotations

import pytest

from agentflow.errors import UserError
from agentflow.models.base import ChatRequest, Message, ToolCall, ToolSpec
from agentflow.models.spec import load_model


async def test_litellm_chat_tools_stream_and_errors(server, fast) -> None:
    model = load_model(
        "litellm:openai/tiny", base_url=server.openai_url, api_key="sk-litellm-test-123", **fast
    )
    response = await model.chat(ChatRequest(messages=[Message.user("hello lite")], n=2))
    assert [c.message.content for c in response.choices] == ["echo: hello lite #0", "echo: hello lite #1"]

    server.script({"status": 503}, {"tool_calls": [{"id": "c1", "name": "f", "arguments": '{"a": 1}'}]})
    response = await model.chat(ChatRequest(messages=[Message.user("tool")], tools=[ToolSpec(name="f")]))
    assert response.message.tool_calls == [ToolCall(id="c1", name="f", arguments={"a": 1})]

    final = None
    async for delta in model.stream(ChatRequest(messages=[Message.user("stream lite")])):
        final = delta.response or final
    assert final is not None and final.text.strip() == "echo: stream lite"

    server.script({"status": 401})
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        await model.chat(ChatRequest(messages=[Message.user("x")]))
    await model.aclose()
