"""Token traces read from the documented response shapes: llama-server's `logprobs.content[]` entries carry
the token `id` and `logprob`; vLLM's `return_token_ids` puts `token_ids` on each choice and `prompt_token_ids`
on the response; OpenAI gives log-probs without ids. A response without any gives no trace."""

from __future__ import annotations

from typing import Any

import pytest

from agentflow.models.backends.openai_backend import from_openai_response


def _response(choice_extra: dict[str, Any], top: dict[str, Any] | None = None) -> dict[str, Any]:
    choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi there"},
              **choice_extra}
    return {"model": "m", "choices": [choice], "usage": {"prompt_tokens": 3, "completion_tokens": 2}, **(top or {})}


LLAMA = {"logprobs": {"content": [{"id": 17, "token": "Hi", "logprob": -0.1, "bytes": [72, 105]},
                                  {"id": 99, "token": " there", "logprob": -1.5,
                                   "bytes": list(b" there")}]}}
VLLM = {"token_ids": [17, 99], "logprobs": {"content": [{"token": "Hi", "logprob": -0.1},
                                                        {"token": " there", "logprob": -1.5}]}}


@pytest.mark.parametrize(("extra", "top", "ids", "prompt_ids", "logprobs"), [
    (LLAMA, None, [17, 99], None, [-0.1, -1.5]),
    (VLLM, {"prompt_token_ids": [1, 2, 3]}, [17, 99], [1, 2, 3], [-0.1, -1.5]),
    ({"token_ids": [17, 99]}, {"prompt_token_ids": [1, 2, 3]}, [17, 99], [1, 2, 3], None),
    ({"logprobs": {"content": [{"token": "Hi", "logprob": -0.1}]}}, None, None, None, [-0.1]),
])
def test_ids_and_logprobs_come_from_the_documented_fields(extra: dict[str, Any], top: dict[str, Any] | None,
                                                          ids: list[int] | None, prompt_ids: list[int] | None,
                                                          logprobs: list[float] | None) -> None:
    trace = from_openai_response(_response(extra, top)).choices[0].trace
    assert trace is not None
    assert (trace.completion_ids, trace.prompt_ids, trace.logprobs) == (ids, prompt_ids, logprobs)
    assert trace.completion_text == "Hi there"


def test_the_completion_text_is_the_text_of_the_ids_not_the_replys() -> None:
    """llama-server's reply text can hold a piece of the stop string its log-probs leave out."""
    raw = _response(LLAMA)
    raw["choices"][0]["message"]["content"] = "Hi there\n"
    trace = from_openai_response(raw).choices[0].trace
    assert trace is not None and trace.completion_text == "Hi there" and trace.completion_ids == [17, 99]


def test_a_response_without_tokens_has_no_trace() -> None:
    assert from_openai_response(_response({})).choices[0].trace is None
    assert from_openai_response(_response({"logprobs": None})).choices[0].trace is None


def test_a_reply_of_no_sampled_token_is_an_empty_trace_not_a_missing_one() -> None:
    """llama-server leaves a stop string's tokens out of the log-probs: a reply that was only one has an empty
    `content` list, which is a trace of zero tokens (the export keeps it), not a backend that gives none."""
    trace = from_openai_response(_response({"logprobs": {"content": []}})).choices[0].trace
    assert trace is not None
    assert (trace.completion_ids, trace.logprobs, trace.completion_text) == ([], [], "")


@pytest.mark.parametrize("closing", [1, 2, 3])
def test_tokens_that_wrote_no_text_at_the_end_are_left_out(closing: int) -> None:
    """A stop string's tokens (the server erases their text) or an end token close the reply with empty bytes:
    they are not the tokens of the recorded text."""
    content = [*LLAMA["logprobs"]["content"],
               *({"id": 200 + i, "token": "", "logprob": -0.2, "bytes": []} for i in range(closing))]
    trace = from_openai_response(_response({"logprobs": {"content": content}})).choices[0].trace
    assert trace is not None
    assert (trace.completion_ids, trace.logprobs, trace.completion_text) == ([17, 99], [-0.1, -1.5], "Hi there")
    only = from_openai_response(_response({"logprobs": {"content": content[2:]}})).choices[0].trace
    assert only is not None and (only.completion_ids, only.logprobs, only.completion_text) == ([], [], "")
