"""Against the real llama-server (Gemma 3 270M): every model call of an agent run records the sampled token ids,
which are the server's own `/tokenize` of the same text, the prompt's ids (whose count is the server's count
of prompt tokens) and a log-prob per sampled token; the export carries them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
from pydantic import BaseModel, field_validator

from agentflow.agents import Agent, AgentConfig
from agentflow.events import EventLog
from agentflow.models.base import ChatRequest, Message
from agentflow.observe.export import trajectory_rows
from agentflow.tools import ToolContext

from .conftest import SMALL, require_llama

pytestmark = pytest.mark.llama


async def _tokenize(client: httpx.AsyncClient, server: object, text: str, *, special: bool) -> list[int]:
    reply = await client.post(server.url("/tokenize"), headers=server.headers,  # type: ignore[attr-defined]
                              json={"content": text, "add_special": special, "parse_special": True})
    reply.raise_for_status()
    return [int(t) for t in reply.json()["tokens"]]


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_every_turn_records_the_servers_own_tokens_and_logprobs(tmp_path: Path, seed: int) -> None:
    require_llama()
    from agentflow.models.backends.local import load_local_model

    model = load_local_model(SMALL, parallel=2, ctx=1024, quiet=True, max_attempts=1)
    server = model.server  # type: ignore[attr-defined]
    events = EventLog(tmp_path / "run" / "events.jsonl", run_id="llama")
    try:
        agent = Agent(AgentConfig(name="a", max_tokens=24, temperature=0.8, output_retries=2), model=model)
        await agent.run(f"Name a colour. ({seed})", ctx=ToolContext(events=events))
        direct = await model.chat(ChatRequest(messages=[Message.user("Count: one, two,")], max_tokens=12,
                                              seed=seed, temperature=1.0))
        events.close()
        rows = trajectory_rows(tmp_path / "run")
        assert rows, "the agent run made no model call"
        async with httpx.AsyncClient(timeout=60) as client:
            for row in rows:
                assert row["tokens_available"], row["tokens_missing"]
                assert row["response_ids"] == await _tokenize(client, server, row["completion_text"], special=False)
                assert row["prompt_token_ids"] == await _tokenize(client, server, row["prompt_text"], special=True)
                assert len(row["rollout_logprobs"]) == len(row["response_ids"])
                assert all(lp <= 0.0 for lp in row["rollout_logprobs"])
                assert row["model_file_sha256"] and len(row["model_file_sha256"]) == 64
            trace = direct.choices[0].trace
            assert trace is not None and trace.prompt_ids is not None
            assert len(trace.prompt_ids) == direct.usage.input_tokens  # the server's own count of prompt tokens
            # the server leaves the tokens that formed a stop string out of the log-probs: at most what it counted
            assert 0 < len(trace.completion_ids or []) <= direct.usage.output_tokens
            assert len(trace.logprobs or []) == len(trace.completion_ids or [])
    finally:
        await model.aclose()


class Codeword(BaseModel):
    """An answer whose JSON shape the server's grammar enforces (one of four words: short, never cut by
    max_tokens), but which a check in Python always refuses: every answer is read, refused and retried with
    feedback, so the conversation grows by the model's own replies."""

    word: Literal["apple", "river", "stone", "cloud"]

    @field_validator("word")
    @classmethod
    def _never_the_code_word(cls, value: str) -> str:
        raise ValueError(f"{value!r} is not the code word; none of the words tried so far is, so try again")


async def test_a_run_longer_than_the_window_is_compacted_and_never_rejected_for_length() -> None:
    """Gemma 3 270M with 768 tokens per slot: each refused answer and its feedback make the conversation
    longer, past the window. Compaction keeps every request (the prompt as the server counted it, plus its
    max_tokens) within the window: the run ends on its retries, never on a length error."""
    require_llama()
    from agentflow.agents.loops import LoopGuardConfig
    from agentflow.models.backends.local import load_local_model

    window, reply = 768, 64
    model = load_local_model(SMALL, parallel=1, ctx=window, quiet=True, max_attempts=1)
    events = EventLog(None)
    try:
        config = AgentConfig(name="guesser", max_tokens=reply, temperature=1.0, output_retries=20, step_limit=21,
                             structured_output=True,  # the server's grammar holds the answer to the schema
                             loop_guard=LoopGuardConfig(enabled=False))
        result = await Agent(config, model=model, output_type=Codeword).run(
            "Guess the code word. " * 25, ctx=ToolContext(events=events))
        whole = await model.count_prompt_tokens(ChatRequest(messages=result.messages))  # type: ignore[attr-defined]
    finally:
        await model.aclose()
    assert whole + reply > window, (result.steps, result.stop_reason, result.error)  # it would not have fit
    assert result.error_kind != "model_error" and result.stop_reason != "context", result.error
    calls = [e.data for e in events.events if e.kind == "model.call"]
    asked = [e.data["sampling"]["max_tokens"] for e in events.events if e.kind == "model.turn"]
    assert len(calls) == len(asked) == result.steps >= 8
    # max_tokens grows on an answer cut short: each request as sent, the prompt as the server counted it
    assert all(c["usage"]["input_tokens"] + most <= window for c, most in zip(calls, asked, strict=True))
    compacted = [e.data for e in events.events if e.kind == "agent.compacted"]
    assert compacted and all(c["fits"] and c["tokens_after"] + c["reply_tokens"] <= window
                             < c["tokens_before"] + c["reply_tokens"] for c in compacted)


async def _streamed(model: object, request: ChatRequest) -> Any:
    final = None
    async for delta in model.stream(request):  # type: ignore[attr-defined]
        if delta.response is not None:
            final = delta.response
    assert final is not None
    return final


@pytest.mark.parametrize("stop", [[], ["\n"], [","]])
async def test_a_streamed_chat_call_records_the_servers_own_tokens(stop: list[str]) -> None:
    """llama-server gives each streamed token's id and log-prob on the chunk it changed; the trace keeps the ids
    only when the server's `/detokenize` of them is the recorded text (no token left out)."""
    require_llama()
    from agentflow.models.backends.local import load_local_model

    model = load_local_model(SMALL, mode="chat", parallel=2, ctx=1024, quiet=True, max_attempts=1)
    server = model.server  # type: ignore[attr-defined]
    try:
        kept = 0
        for seed in (1, 2, 3):
            request = ChatRequest(messages=[Message.user("Count: one, two, three,")], max_tokens=16, seed=seed,
                                  temperature=1.0, stop=stop)
            response = await _streamed(model, request)
            trace = response.choices[0].trace
            assert trace is not None and trace.source.endswith("stream logprobs")
            assert response.identity["file_sha256"] and len(response.identity["file_sha256"]) == 64
            if trace.completion_ids is None:  # a token the stream left out: said so, never a wrong list of ids
                assert trace.missing and "do not spell the reply" in trace.missing
                continue
            kept += 1
            async with httpx.AsyncClient(timeout=60) as client:
                assert trace.completion_ids == await _tokenize(client, server, trace.completion_text, special=False)
                assert trace.prompt_text is not None and trace.prompt_ids is not None
                assert trace.prompt_ids == await _tokenize(client, server, trace.prompt_text, special=True)
            assert len(trace.prompt_ids) == response.usage.input_tokens
            assert len(trace.logprobs or []) == len(trace.completion_ids) <= response.usage.output_tokens
        if not stop:
            assert kept == 3  # nothing is held back without a stop string: every streamed call keeps its ids
    finally:
        await model.aclose()


async def test_a_streamed_call_that_offers_tools_says_why_it_has_no_ids() -> None:
    """llama-server refuses log-probs on a stream that offers tools: the call streams without them and its
    trace says so (the export's `tokens_missing`)."""
    require_llama()
    from agentflow.models.backends.local import STREAM_WITH_TOOLS, load_local_model
    from agentflow.models.base import ToolSpec

    model = load_local_model(SMALL, mode="chat", parallel=2, ctx=1024, quiet=True, max_attempts=1)
    try:
        request = ChatRequest(messages=[Message.user("What time is it?")], max_tokens=12, seed=1,
                              tools=[ToolSpec(name="clock", description="The current time.")])
        response = await _streamed(model, request)
    finally:
        await model.aclose()
    trace = response.choices[0].trace
    assert trace is not None and trace.completion_ids is None and trace.logprobs is None
    assert trace.missing == STREAM_WITH_TOOLS


async def test_a_reply_of_only_whitespace_before_a_stop_string_has_an_empty_trace(tmp_path: Path) -> None:
    """Gemma 3 270M in completion mode sometimes answers a newline and then the template's stop string;
    llama-server gives that reply no log-probs at all. The message keeps the stripped text (none), and the
    trace records the same: no completion ids, no log-probs, the prompt's own ids; never a missing trace."""
    require_llama()
    from agentflow.models.backends.local import load_local_model

    model = load_local_model(SMALL, parallel=2, ctx=1024, quiet=True, max_attempts=1)
    system = Message.system("You are a careful assistant.\n\n\nWhen you are finished, reply with your final answer.")
    found = None
    try:
        for seed in range(1, 121):  # the seeds that give such a reply depend on the build: search for one
            response = await model.chat(ChatRequest(messages=[system, Message.user(f"Name a colour. ({seed % 4})")],
                                                    max_tokens=24, temperature=0.8, seed=seed))
            if response.choices[0].message.content == "" and response.usage.output_tokens > 0:
                found = response
                break
    finally:
        await model.aclose()
    assert found is not None, "no seed gave an empty reply: pick another prompt for this test"
    trace = found.choices[0].trace
    assert trace is not None and trace.completion_ids == [] and trace.logprobs == []
    assert trace.prompt_ids is not None and len(trace.prompt_ids) == found.usage.input_tokens
