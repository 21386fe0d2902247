"""SampleBatcher: concurrent samples of one prompt become one request with n; everything else passes through."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from agentflow.models.base import ChatRequest, ChatResponse, Choice, Message, StreamDelta, Usage
from agentflow.models.batching import SampleBatcher


class Scripted:
    """Answers `n` choices numbered by the request's seed; records every request it gets."""

    spec = "scripted:numbers"

    def __init__(self, fail: bool = False) -> None:
        self.requests: list[ChatRequest] = []
        self.fail = fail

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        await asyncio.sleep(0.01)
        if self.fail:
            raise ConnectionError("server went away")
        seed = request.seed or 0
        choices = [Choice(message=Message(role="assistant", content=f"answer {seed + i}"), finish_reason="stop")
                   for i in range(request.n)]
        return ChatResponse(choices=choices, usage=Usage(input_tokens=100, output_tokens=10 * request.n))

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


def _req(text: str, seed: int, **kw: object) -> ChatRequest:
    fields: dict[str, object] = {"temperature": 0.7, **kw}
    return ChatRequest(messages=[Message.user(text)], seed=seed, **fields)  # type: ignore[arg-type]


async def test_samples_of_one_prompt_go_as_one_request_and_each_caller_gets_its_own_choice() -> None:
    inner = Scripted()
    model = SampleBatcher(inner, max_n=8)
    replies = await asyncio.gather(*(model.chat(_req("fix it", seed)) for seed in (5, 6, 7)),
                                   model.chat(_req("other prompt", 9)))
    assert len(inner.requests) == 2
    batched = next(r for r in inner.requests if r.n == 3)
    assert batched.seed == 5  # the first caller's seed; the server derives the others
    assert [r.choices[0].message.content for r in replies] == ["answer 5", "answer 6", "answer 7", "answer 9"]
    # the prompt is charged once, the output tokens are shared: totals match what the server reported
    assert sum(r.usage.input_tokens for r in replies[:3]) == 100
    assert sum(r.usage.output_tokens for r in replies[:3]) == 30
    assert model.requests_sent == 2


async def test_groups_are_capped_at_max_n_and_requests_with_n_pass_through() -> None:
    inner = Scripted()
    model = SampleBatcher(inner, max_n=2)
    await asyncio.gather(*(model.chat(_req("same", s)) for s in range(5)))
    assert sorted(r.n for r in inner.requests) == [1, 2, 2]
    inner.requests.clear()
    reply = await model.chat(_req("same", 0, n=4))
    assert [r.n for r in inner.requests] == [4] and len(reply.choices) == 4


async def test_requests_that_differ_beyond_the_seed_are_not_merged() -> None:
    inner = Scripted()
    model = SampleBatcher(inner)
    await asyncio.gather(model.chat(_req("same", 1)), model.chat(_req("same", 2, max_tokens=5)),
                         model.chat(_req("same", 3, temperature=0.0)))
    assert [r.n for r in inner.requests] == [1, 1, 1]


async def test_a_failed_request_fails_every_caller_and_a_cancelled_caller_leaves_the_others() -> None:
    model = SampleBatcher(Scripted(fail=True))
    results = await asyncio.gather(*(model.chat(_req("x", s)) for s in range(3)), return_exceptions=True)
    assert all(isinstance(r, ConnectionError) for r in results)

    inner = Scripted()
    model = SampleBatcher(inner, window_s=0.05)
    first = asyncio.ensure_future(model.chat(_req("y", 1)))
    second = asyncio.ensure_future(model.chat(_req("y", 2)))
    await asyncio.sleep(0)
    first.cancel()
    reply = await second
    assert reply.choices[0].message.content in ("answer 1", "answer 2")
    with pytest.raises(asyncio.CancelledError):
        await first
