"""`ask`: one question to a model, charged once; `code_block`: which block of an answer is its code."""

from __future__ import annotations

import pytest

from agentflow.budget import Budget, BudgetExceeded
from agentflow.errors import ModelError
from agentflow.models.ask import ask, ask_request, code_block, code_blocks
from agentflow.models.base import ChatResponse
from agentflow.models.instrumented import InstrumentedModel
from agentflow.models.replay import request_key
from agentflow.models.testing import FunctionModel


async def test_the_request_holds_the_system_message_the_shots_and_the_question() -> None:
    model = FunctionModel(lambda request: "4")
    answer = await ask(model, "2+2?", system="Be brief.", shots=[("1+1?", "2")], max_tokens=8, seed=3, stop=["\n"])
    sent = model.requests[0]
    assert [(m.role, m.content) for m in sent.messages] == [
        ("system", "Be brief."), ("user", "1+1?"), ("assistant", "2"), ("user", "2+2?")]
    assert (sent.temperature, sent.max_tokens, sent.seed, sent.stop) == (0.0, 8, 3, ["\n"])
    assert (answer.text, answer.finish) == ("4", "stop") and answer.usage.total_tokens > 0
    # without a system message none is sent, and the request is what `ask_request` builds (a cassette matches)
    await ask(model, "hi", max_tokens=None, temperature=None)
    assert [m.role for m in model.requests[1].messages] == ["user"]
    assert request_key(model.requests[1]) == request_key(ask_request("hi", max_tokens=None, temperature=None))


async def test_a_call_is_charged_to_the_budget_once() -> None:
    budget = Budget(model_calls=2)
    plain = FunctionModel(lambda request: "ok")
    await ask(plain, "one", max_tokens=8, budget=budget)
    assert budget.used.model_calls == 1 and budget.used.tokens > 0
    # a model that charges the budget itself is not charged again
    await ask(InstrumentedModel(plain, budget=budget), "two", max_tokens=8, budget=budget)
    assert budget.used.model_calls == 2
    with pytest.raises(BudgetExceeded):
        await ask(plain, "three", max_tokens=8, budget=budget)


async def test_a_reply_without_a_sample_is_a_model_error() -> None:
    model = FunctionModel(lambda request: ChatResponse(choices=[]))
    with pytest.raises(ModelError, match="no answer"):
        await ask(model, "hi", max_tokens=8)


def test_the_code_is_the_longest_block_in_the_language_asked_for() -> None:
    example_first = ("For example:\n```python\nprint(add(1, 2))\n```\nThe function:\n"
                     "```python\ndef add(a, b):\n    return a + b\n```\n")
    assert code_block(example_first) == "def add(a, b):\n    return a + b"
    # a longer block of another language (a command, the expected output) is not the code
    script = "```bash\npython reproduce.py --verbose --with-a-long-option\n```\n```py\nimport pkg\npkg.run()\n```"
    assert code_block(script) == "import pkg\npkg.run()"
    output = "```python\nimport pkg\n```\nOutput:\n```text\nTraceback (most recent call last):\n  ...\n```"
    assert code_block(output) == "import pkg"
    # untagged blocks count when no block is tagged; an unclosed last block runs to the end
    assert code_block("```\nx = 1\n```\n```\nx = 1\ny = 2\n") == "x = 1\ny = 2"
    assert code_block("```json\n{}\n```") is None and code_block("no code") is None
    assert code_block('```json\n{"a": 1}\n```', "json") == '{"a": 1}'


def test_blocks_keep_their_indentation_without_the_blank_lines_around() -> None:
    text = "```python\n\n    def f(self):\n        return 1\n\n```\ntext\n```diff\n-a\n+b\n```\n```\n\n```"
    assert code_blocks(text) == ["    def f(self):\n        return 1", "-a\n+b"]

