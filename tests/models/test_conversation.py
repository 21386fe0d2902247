"""`Conversation`: each turn sends every earlier message, in order, and keeps the model's answer."""

from __future__ import annotations

from agentflow.models.ask import Conversation
from agentflow.models.base import ChatRequest
from agentflow.models.testing import FunctionModel


def _echo_turn(request: ChatRequest) -> str:
    return f"answer {sum(m.role == 'assistant' for m in request.messages) + 1}"


async def test_a_conversation_keeps_every_turn_in_order() -> None:
    model = FunctionModel(_echo_turn)
    conversation = Conversation.start("be brief", "first question")
    assert await conversation.reply(model, temperature=0.0, seed=7, max_tokens=16) == "answer 1"
    conversation.tell("second question")
    assert await conversation.reply(model, temperature=0.5, seed=8, max_tokens=32) == "answer 2"

    first, second = model.requests
    assert [(m.role, m.content) for m in second.messages] == [
        ("system", "be brief"), ("user", "first question"), ("assistant", "answer 1"), ("user", "second question")]
    assert len(first.messages) == 2  # the request sent is not changed by later turns
    assert (second.temperature, second.seed, second.max_tokens) == (0.5, 8, 32)
    assert [m.role for m in conversation.messages][-1] == "assistant"
