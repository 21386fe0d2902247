"""A real llama-server with the small embedded model: requests, samples, concurrency, failures, shutdown."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from agentflow.errors import UserError
from agentflow.events import EventLog
from agentflow.models.base import ChatRequest, Message
from agentflow.models.spec import served_model
from agentflow.serving.completion import CompletionChatModel
from agentflow.serving.metric_events import emit_metrics
from agentflow.serving.process import reap_orphans, run_dir
from agentflow.serving.server import ServerDied, ServerHandle
from tests.serving.conftest import SMALL, require_llama, start_small

pytestmark = pytest.mark.llama


def _gone(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().split()[2] == "Z"


def _wait_gone(pid: int | None, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return _gone(pid)


def _completion_model(handle: ServerHandle, **options: object) -> CompletionChatModel:
    from agentflow.models.options import ModelOptions

    return CompletionChatModel(handle.spec, handle.model, ModelOptions(api_key=handle.api_key, **options),
                               compatible_base_url=handle.base_url)


async def test_health_auth_and_metrics(small_server: ServerHandle) -> None:
    assert await small_server.health()
    async with httpx.AsyncClient() as client:
        anonymous = await client.get(small_server.url("/v1/models"))
        assert anonymous.status_code == 401  # the generated key is required
        authed = await client.get(small_server.url("/v1/models"), headers=small_server.headers)
        assert authed.status_code == 200
    figures = await small_server.metrics()
    assert "generation_tokens_total" in figures and "requests_running" in figures


async def test_chat_request(small_server: ServerHandle) -> None:
    model = served_model(small_server, max_attempts=1)
    try:
        response = await model.chat(ChatRequest(messages=[Message.user("Say hello.")], max_tokens=8, temperature=0))
    finally:
        await model.aclose()
    assert len(response.choices) == 1
    assert response.usage.output_tokens > 0 and response.usage.input_tokens > 0
    assert response.choices[0].finish_reason in ("stop", "length")
    assert response.usage.cost_usd == 0.0  # a loopback server costs nothing


async def test_completion_mode_n_samples(small_server: ServerHandle) -> None:
    model = _completion_model(small_server, max_attempts=1)
    request = ChatRequest(messages=[Message.user("Name a colour.")], n=4, temperature=1.0, max_tokens=12)
    try:
        response = await model.chat(request)
    finally:
        await model.aclose()
    assert len(response.choices) == 4
    texts = [c.message.content or "" for c in response.choices]
    assert len(set(texts)) >= 2, texts  # sampled, not one answer copied four times
    assert response.usage.output_tokens > 0


async def test_concurrent_requests_and_metrics_event(small_server: ServerHandle) -> None:
    model = _completion_model(small_server, max_attempts=1, concurrency=8)
    before = (await small_server.metrics())["generation_tokens_total"] or 0
    requests = [ChatRequest(messages=[Message.user(f"Count to {i + 3}.")], max_tokens=10, temperature=0.5, seed=i)
                for i in range(6)]
    try:
        responses = await asyncio.gather(*(model.chat(r) for r in requests))
    finally:
        await model.aclose()
    produced = sum(r.usage.output_tokens for r in responses)
    assert all(r.choices and r.usage.output_tokens > 0 for r in responses)
    events = EventLog()
    data = await emit_metrics(small_server, events)
    assert events.events[-1].kind == "server.metrics"
    assert data["server"] == "llamacpp" and data["model"] == SMALL
    assert data["generation_tokens_total"] >= before + produced


def test_explicit_port_already_taken_is_a_user_error() -> None:
    require_llama()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        taken = sock.getsockname()[1]
        with pytest.raises(UserError, match=f"port {taken} .*already in use"):
            start_small(port=taken)


def test_auto_port_retries_when_the_picked_port_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    require_llama()
    import agentflow.serving.server as server_mod

    real_pick = server_mod.pick_free_port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        taken = sock.getsockname()[1]
        picks = iter([taken])  # the race: someone grabbed the port we picked
        monkeypatch.setattr(server_mod, "pick_free_port", lambda host: next(picks, None) or real_pick(host))
        handle = start_small()
        try:
            assert handle.alive and handle.port != taken
            assert "bind" in Path(handle.log_path).read_text().lower()
        finally:
            handle.stop_sync()
    assert _wait_gone(handle.pid)


async def test_killed_server_with_restart_never_fails_clearly() -> None:
    require_llama()
    from agentflow.models.backends.local import load_local_model

    model = load_local_model(SMALL, restart="never", parallel=2, ctx=512, quiet=True, max_attempts=2,
                             retry_initial_s=0)
    server = model.server  # type: ignore[attr-defined]
    request = ChatRequest(messages=[Message.user("Hi")], max_tokens=4)
    try:
        assert (await model.chat(request)).choices
        server.process.kill()
        with pytest.raises(ServerDied, match="killed by signal 9.*restart policy is 'never'"):
            await model.chat(request)
    finally:
        await model.aclose()
    assert _wait_gone(server.pid)


async def test_server_killed_mid_request_is_restarted_and_the_call_retried() -> None:
    require_llama()
    from agentflow.models.backends.local import load_local_model

    model = load_local_model(SMALL, restart="on-failure", max_restarts=1, parallel=3, ctx=512, quiet=True,
                             retry_initial_s=0)
    server = model.server  # type: ignore[attr-defined]
    first_pid = server.pid
    try:
        # long enough to be mid-generation when the server is killed, even on a fast, quiet machine (100 tokens
        # of the small model can be done within the wait)
        call = asyncio.create_task(model.chat(ChatRequest(messages=[Message.user("Tell a long story.")],
                                                          max_tokens=400, temperature=0.7)))
        await asyncio.sleep(0.15)
        assert not call.done()
        server.process.kill()
        response = await call
        assert response.choices and response.usage.output_tokens > 0
        assert server.restarts == 1 and server.pid != first_pid and server.alive
        server.process.kill()  # the second death exceeds max_restarts=1
        with pytest.raises(ServerDied, match="max_restarts=1"):
            await model.chat(ChatRequest(messages=[Message.user("Hi")], max_tokens=4))
    finally:
        await model.aclose()
    assert _wait_gone(first_pid) and _wait_gone(server.pid)


async def test_local_models_share_one_server_and_the_last_close_stops_it() -> None:
    require_llama()
    from agentflow.models.backends.local import load_local_model

    a = load_local_model(SMALL, parallel=2, ctx=512, quiet=True)
    b = load_local_model(SMALL, parallel=2, ctx=512, quiet=True)
    server = a.server  # type: ignore[attr-defined]
    assert b.server is server  # type: ignore[attr-defined]
    # n samples beyond the 2 slots: two requests of n=2 (seeds 7, 8 and 9, 10), decoded together in the slots
    response = await a.chat(ChatRequest(messages=[Message.user("Name an animal.")], n=4, seed=7, temperature=1.0,
                                        max_tokens=8))
    assert len(response.choices) == 4 and response.usage.output_tokens >= 4
    assert len({c.message.content for c in response.choices}) >= 2
    await a.aclose()
    assert server.alive
    await b.aclose()
    assert _wait_gone(server.pid)
    assert not (run_dir() / f"{server.pid}.json").exists()


def _start_cli(*args: str) -> tuple[subprocess.Popen[str], dict[str, object]]:
    exe = Path(sys.executable).with_name("agentflow")
    proc = subprocess.Popen([str(exe), "serve", "llamacpp", SMALL, "--parallel", "2", "--ctx", "512", "--json", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(timeout=10)
        raise AssertionError(f"serve exited early: {proc.stderr.read() if proc.stderr else ''}")
    return proc, json.loads(line)


def test_cli_serve_ctrl_c_stops_the_server_cleanly() -> None:
    require_llama()
    proc, info = _start_cli()
    try:
        assert httpx.get(f"http://127.0.0.1:{info['port']}/health", timeout=5).status_code == 200
        assert info["spec"] == f"openai-compatible:{info['base_url']}#{SMALL}"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=90) == 0  # generous: CI machines can be loaded
        assert _wait_gone(info["pid"])  # type: ignore[arg-type]
        assert not (run_dir() / f"{info['pid']}.json").exists()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_cli_serve_sigterm_stops_and_a_killed_cli_takes_its_server_along() -> None:
    require_llama()
    proc, info = _start_cli()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=20)
    assert _wait_gone(info["pid"])  # type: ignore[arg-type]

    proc, info = _start_cli()
    proc.kill()  # SIGKILL: no clean-up can run in the CLI; the kernel's parent-death signal ends the server
    proc.wait(timeout=10)
    assert _wait_gone(info["pid"], 5.0)  # type: ignore[arg-type]
    reap_orphans()  # its pidfile, left behind by the killed CLI, goes at the next start
    assert not (run_dir() / f"{info['pid']}.json").exists()


async def test_report_metrics_writes_events_while_a_block_runs(small_server: ServerHandle) -> None:
    from agentflow.serving.metric_events import report_metrics

    events = EventLog()
    deadline = time.monotonic() + 30  # generous: a loaded machine answers /metrics slowly
    async with report_metrics(small_server, events, interval_s=0.1, node_id="search"):
        while len(events.events) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        periodic = len(events.events)
    assert periodic >= 2  # samples taken while the block runs...
    assert [e.kind for e in events.events] == ["server.metrics"] * (periodic + 1)  # ...and one at its end
    assert all(e.node_id == "search" and "generation_tokens_total" in e.data for e in events.events)


async def test_n_samples_evaluate_the_prompt_once_and_count_every_sample() -> None:
    require_llama()
    from agentflow.models.backends.local import load_local_model

    model = load_local_model(SMALL, parallel=4, ctx=1024, quiet=True, max_attempts=1)
    server = model.server  # type: ignore[attr-defined]
    prompt = " ".join(f"Item {i} is a fruit or a vegetable." for i in range(40)) + " Name one more."
    try:
        before = await server.metrics()
        response = await model.chat(ChatRequest(messages=[Message.user(prompt)], n=4, seed=11, temperature=1.0,
                                                max_tokens=16))
        after = await server.metrics()
        async with httpx.AsyncClient() as client:
            lengths = [len((await client.post(server.url("/tokenize"), headers=server.headers,
                                              json={"content": c.message.content or ""})).json()["tokens"])
                       for c in response.choices]
    finally:
        await model.aclose()
    assert len(response.choices) == 4
    assert len({c.message.content for c in response.choices}) >= 2  # four samples, not one copied
    evaluated = after["prompt_tokens_total"] - before["prompt_tokens_total"]
    assert response.usage.input_tokens > 300
    assert evaluated < 2 * response.usage.input_tokens  # one prompt evaluation for the four samples
    generated = after["generation_tokens_total"] - before["generation_tokens_total"]
    assert response.usage.output_tokens >= sum(lengths) > 16  # every sample's tokens, not the first one's
    # counted from the returned texts: stop strings cut off a few generated tokens
    assert 0.75 * generated <= response.usage.output_tokens <= generated + 4


async def test_a_raw_request_is_its_prompt_alone_and_comes_back_as_generated(small_server: ServerHandle) -> None:
    """`raw=True` sends the one message's text to `/v1/completions` with no chat or few-shot template: at
    temperature 0 both the chat-mode and the completion-mode client get what the server gives for that text
    called directly, the same prompt tokens, and the continuation unstripped (a fill-in-the-middle answer's
    indentation is part of it)."""
    prompt = "def add(a, b):\n    return"
    request = ChatRequest(messages=[Message.user(prompt)], raw=True, max_tokens=8, temperature=0)
    chat_mode, completion_mode = served_model(small_server, max_attempts=1), _completion_model(small_server, max_attempts=1)
    try:
        responses = [await chat_mode.chat(request), await completion_mode.chat(request)]
        streamed = [delta async for delta in chat_mode.stream(request)]
    finally:
        await chat_mode.aclose()
        await completion_mode.aclose()
    async with httpx.AsyncClient(timeout=120) as client:
        direct = (await client.post(small_server.url("/v1/completions"), headers=small_server.headers,
                                    json={"prompt": prompt, "max_tokens": 8, "temperature": 0})).json()
    text = direct["choices"][0]["text"]
    assert text.strip() and text != text.strip()  # the case the test is about: whitespace around the answer
    assert [r.text for r in responses] == [text, text]
    assert [r.usage.input_tokens for r in responses] == [direct["usage"]["prompt_tokens"]] * 2
    assert streamed[-1].response is not None and streamed[-1].response.text == text
