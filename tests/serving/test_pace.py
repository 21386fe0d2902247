"""A request to a CPU llama-server waits by the server's measured pace: past its deadline it is not cut while
the server works on, and it is given up (a TransientError, retried) when the server makes no progress."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from agentflow.models.backends.retry import TransientError
from agentflow.models.base import ChatRequest, Message
from agentflow.models.options import ModelOptions
from agentflow.serving.completion import CompletionChatModel
from agentflow.serving.pace import Pace, ServerPace
from agentflow.serving.server import ServerHandle
from tests.serving.conftest import require_llama, start_small


def test_the_deadline_follows_the_measured_rates() -> None:
    pace = ServerPace("http://127.0.0.1:9/metrics", {}, Pace(slack=2.0, floor_s=1.0))
    counters = {"llamacpp:prompt_tokens_total": 1000.0, "llamacpp:prompt_seconds_total": 10.0,  # 100 tokens/s
                "llamacpp:tokens_predicted_total": 200.0, "llamacpp:tokens_predicted_seconds_total": 50.0}  # 4/s
    # 3,500 characters ~ 1,000 tokens: 10 s to read, 400 tokens at 4/s: 100 s
    assert pace.predict_s(counters, 3500, 400) == pytest.approx(110.0)
    # two requests waiting behind two running ones: twice as long
    queued = {**counters, "llamacpp:requests_processing": 2.0, "llamacpp:requests_deferred": 2.0}
    assert pace.predict_s(queued, 3500, 400) == pytest.approx(220.0)
    assert pace.predict_s({}, 3500, 400) is None  # nothing measured yet: the first deadline applies


def test_progress_is_a_grown_decode_count() -> None:
    from agentflow.serving.pace import _progressed

    assert _progressed({"llamacpp:n_decode_total": 3.0}, {"llamacpp:n_decode_total": 4.0})
    assert not _progressed({"llamacpp:n_decode_total": 4.0}, {"llamacpp:n_decode_total": 4.0})
    assert not _progressed({"llamacpp:n_decode_total": 4.0}, None)  # no answer from the server: none


@pytest.fixture()
def server() -> ServerHandle:
    require_llama()
    handle = start_small(parallel=2)
    yield handle
    handle.stop_sync()


def _model(handle: ServerHandle) -> CompletionChatModel:
    return CompletionChatModel(handle.spec, handle.model, ModelOptions(api_key=handle.api_key, max_attempts=1),
                               compatible_base_url=handle.base_url)


@pytest.mark.llama
async def test_a_slow_request_that_progresses_is_waited_for(server: ServerHandle) -> None:
    model = _model(server)
    # deadlines far shorter than the answer takes: only the progress check keeps the request alive (it is
    # judged over 30 s: on a loaded CPU one decode step of a cold prompt can take seconds)
    pace = ServerPace(server.url("/metrics"), dict(server.headers),
                      Pace(first_deadline_s=0.05, floor_s=0.05, recheck_s=30.0, slack=0.001))
    request = ChatRequest(messages=[Message.user("Write a long story about a lighthouse keeper.")],
                          max_tokens=200, temperature=0.8, seed=1)
    waits: list[float] = []
    try:
        response = await pace.wait(lambda: model._chat_once(request), prompt_chars=60, max_tokens=200,
                                   on_extend=waits.append)
    finally:
        await model.aclose()
    assert response.usage.output_tokens > 20
    assert pace.extended >= 1 and waits == sorted(waits)  # it ran past its deadline and was not cut
    counters = await pace.counters()
    assert counters is not None and counters["llamacpp:tokens_predicted_total"] >= response.usage.output_tokens


@pytest.mark.llama
async def test_a_server_that_stops_making_progress_is_given_up(server: ServerHandle) -> None:
    model = _model(server)
    pace = ServerPace(server.url("/metrics"), dict(server.headers),
                      Pace(first_deadline_s=0.5, floor_s=0.5, recheck_s=0.5, slack=0.001))
    request = ChatRequest(messages=[Message.user("Count from one to fifty in words.")], max_tokens=200)
    assert server.pid is not None
    os.kill(server.pid, signal.SIGSTOP)  # a hung server: it neither answers nor decodes
    started = time.monotonic()
    try:
        with pytest.raises(TransientError, match="no progress"):
            await pace.wait(lambda: model._chat_once(request), prompt_chars=40, max_tokens=200)
    finally:
        os.kill(server.pid, signal.SIGCONT)
        await model.aclose()
    # a 5 s metrics read, the first deadline and another 5 s read: not the HTTP timeout
    assert time.monotonic() - started < 30
    await asyncio.sleep(0)
