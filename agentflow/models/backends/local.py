"""`local:NAME` models: an embedded open model served on CPU by a managed llama-server.

`load_local_model("gemma3-270m")` sets up the model file and llama-server if needed, starts the server on
127.0.0.1 with a generated API key and returns an OpenAI-compatible ChatModel for it. Models with the same name
and server options share one server within a process; the last `aclose()` stops it. A server that dies is
restarted by the next call (`restart="on-failure"`, at most `max_restarts` times), else `ServerDied`.

`n` samples go as one request with `n` (llama-server's `n_cmpl`, split by the server's slots): the prompt is
evaluated once, not `n` times.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

import httpx
from pydantic import Field

from agentflow.config import StrictConfig, validate_config
from agentflow.errors import UserError
from agentflow.models.backends import openai_backend as oai
from agentflow.models.backends.openai_backend import STREAM_SOURCE, OpenAIChatModel
from agentflow.models.backends.retry import TransientError
from agentflow.models.base import ChatModel, ChatRequest, ChatResponse, StreamDelta, TokenTrace
from agentflow.models.options import ModelOptions
from agentflow.serving.completion import CompletionChatModel, FewShotTemplate
from agentflow.serving.embedded import embedded_model
from agentflow.serving.pace import Pace, ServerPace
from agentflow.serving.server import ServerDied, ServerHandle

LOCAL_TIMEOUT_S = Pace.first_deadline_s
"""How long one request may take before the server's speed is measured; `local:` models then wait by that
speed (`agentflow.serving.pace`) unless `timeout_s` is given."""

STREAM_WITH_TOOLS = ("streamed call that offered tools: llama-server gives no log-probs to such a stream "
                     "('logprobs is not supported with tools + stream'); call without streaming for training data")

LOCAL_HARD_TIMEOUT_S = 3600.0
"""The HTTP ceiling of one paced request (the pace decides sooner; this only bounds a server gone silent)."""


class LocalServingOptions(StrictConfig):
    """Options of `local:` models beyond the usual `ModelOptions`."""

    parallel: int | None = Field(default=None, ge=1, le=64)
    """llama-server slots decoded together; default: 4 for qwen2.5-coder-1.5b, 8 for gemma3-270m."""
    ctx: int | None = Field(default=None, ge=256)
    """Context tokens per slot; default: 8192 for qwen2.5-coder-1.5b, 2048 for gemma3-270m."""
    threads: int | None = Field(default=None, ge=1)
    """CPU threads for llama-server."""
    startup_timeout_s: float = Field(default=120.0, gt=0)
    """Seconds to wait for the server to become healthy."""
    restart: Literal["on-failure", "never"] = "on-failure"
    """What to do when the server dies while in use."""
    max_restarts: int = Field(default=2, ge=0)
    """Restarts allowed over the life of the server."""
    mode: Literal["auto", "chat", "completion"] = "auto"
    """`auto` follows the model's profile (gemma3-270m is a base model: completion mode)."""
    template: FewShotTemplate | None = None
    """Completion-mode prompt template; default: a plain question/answer template."""
    quiet: bool = False
    """Do not print set-up and start-up progress to stderr."""


_LOCAL_FIELDS = set(LocalServingOptions.model_fields)


class _SharedServer:
    """One llama-server shared by every local model object with the same key."""

    def __init__(self, handle: ServerHandle, key: tuple[Any, ...], opts: LocalServingOptions) -> None:
        self.handle = handle
        self.key = key
        self.opts = opts
        self.users = 0
        self.lock = threading.Lock()
        self.pace = self._new_pace()
        self.told: set[str] = set()  # the notices printed (each once per server)

    def _new_pace(self) -> ServerPace | None:
        """The pace of the server (None without a metrics endpoint: then `timeout_s` alone limits a request)."""
        path = self.handle.launch.metrics_path
        return ServerPace(self.handle.url(path), dict(self.handle.headers)) if path else None

    def say_once(self, notice: str, message: str) -> None:
        """Print `message` unless this server's `notice` was printed already."""
        if notice not in self.told:
            self.told.add(notice)
            _say(self.opts, message)

    def recover(self) -> None:
        """Make sure the server runs again after it died (once, whoever notices first), or raise ServerDied."""
        with self.lock:
            if self.handle.alive:  # never died, or someone else restarted it already
                return
            died = self.handle.died_error()
            if self.opts.restart == "never" or self.handle.restarts >= self.opts.max_restarts:
                why = "restart policy is 'never'" if self.opts.restart == "never" else \
                    f"restarted {self.handle.restarts} times already (max_restarts={self.opts.max_restarts})"
                raise ServerDied(f"{died.summary} ({why})", died.log_tail)
            _say(self.opts, f"{died.summary}; restarting it")
            self.handle.restart_sync()
            self.pace = self._new_pace()  # another port, fresh counters


_servers: dict[tuple[Any, ...], _SharedServer] = {}
_servers_lock = threading.Lock()


def _say(opts: LocalServingOptions, message: str) -> None:
    if not opts.quiet:
        print(f"agentflow: {message}", file=sys.stderr, flush=True)


def _acquire(name: str, opts: LocalServingOptions) -> _SharedServer:
    from agentflow.serving.llamacpp import LlamaServerOptions, llamacpp_launch

    key = (name, opts.parallel, opts.ctx, opts.threads)
    with _servers_lock:
        shared = _servers.get(key)
        if shared is not None and (shared.handle.alive or shared.users > 0):
            shared.users += 1
            return shared
        say: Callable[[str], None] = lambda m: _say(opts, m)
        launch = llamacpp_launch(LlamaServerOptions(model=name, parallel=opts.parallel, ctx=opts.ctx,
                                                    threads=opts.threads,
                                                    startup_timeout_s=opts.startup_timeout_s), say=say)
        handle = ServerHandle(launch)
        say(f"starting llama-server for local:{name}")
        started = time.monotonic()
        handle.start_sync()
        say(f"llama-server for local:{name} ready on {handle.base_url} in {time.monotonic() - started:.1f}s "
            f"(pid {handle.pid})")
        shared = _SharedServer(handle, key, opts)
        shared.users = 1
        _servers[key] = shared
        return shared


def _release(shared: _SharedServer) -> None:
    with _servers_lock:
        shared.users -= 1
        if shared.users > 0:
            return
        if _servers.get(shared.key) is shared:
            del _servers[shared.key]
    shared.handle.stop_sync()


class _ServerBacked:
    """Mixin for OpenAI-style backends that talk to a `_SharedServer` and must survive its death. The server
    reports the output tokens of the first of `n` samples only: the others are counted with its `/tokenize`."""

    native_n = False
    shared: _SharedServer
    _seen_restarts: int
    _released: bool
    spec: str
    base_url: str | None
    _client: Any
    paced: bool = True
    """Requests wait by the server's measured pace (`agentflow.serving.pace`); False: `timeout_s` is the limit."""
    trace_tokens = True
    """Every call records its prompt and sampled token ids and the sampled tokens' log-probs (`Choice.trace`),
    except a streamed call that offers tools (llama-server refuses log-probs there: the trace says so)."""

    def __init__(self, spec: str, shared: _SharedServer, options: ModelOptions, **kwargs: Any) -> None:
        super().__init__(spec, shared.handle.model, options,  # type: ignore[call-arg]
                         compatible_base_url=shared.handle.base_url, **kwargs)
        self.shared, self._seen_restarts, self._released = shared, shared.handle.restarts, False
        self.profile = shared.handle.profile

    @property
    def server(self) -> ServerHandle:
        return self.shared.handle

    async def _ensure_running(self) -> None:
        """Recover the server when it died or was restarted since this model last used it."""
        if not self.shared.handle.alive or self._seen_restarts != self.shared.handle.restarts:
            await self._recover()

    async def _tokenize(self, client: httpx.AsyncClient, text: str, **flags: bool) -> list[int]:
        """The server's tokens of `text` (`/tokenize`; `flags`: add_special, parse_special)."""
        reply = await _post(client, self.shared.handle, "/tokenize", {"content": text, **flags})
        return [int(t) for t in reply["tokens"]]

    async def _recover(self) -> None:
        await asyncio.to_thread(self.shared.recover)
        self._seen_restarts = self.shared.handle.restarts
        if self.base_url != self.shared.handle.base_url:  # restarted on another port
            self.base_url = self.shared.handle.base_url
            old, self._client = self._client, None
            if old is not None:
                await old.close()

    async def _chat_once(self, request: ChatRequest) -> ChatResponse:
        if self._released:
            raise UserError(f"{self.spec}: the model was closed", hint="load it again with load_model")
        await self._ensure_running()
        # minutes of prompt evaluation on a CPU must not be silent
        self.shared.say_once("first call", f"{self.spec}: first call; the model is reading the prompt on CPU "
                             "(a long prompt can take minutes on a small machine; later calls reuse its cache)")
        call = functools.partial(super()._chat_once, request)  # type: ignore[misc]
        try:
            pace = self.shared.pace
            if not self.paced or pace is None:
                response = await call()
            else:
                prompt_chars = sum(len(m.content or "") for m in request.messages)
                response = await pace.wait(call, prompt_chars=prompt_chars, max_tokens=request.max_tokens or 512,
                                           on_extend=self._extended)
            return await self._traced(response, request)
        except Exception:
            if not await _died(self.shared.handle):
                raise
        await self._recover()  # raises ServerDied when the policy forbids a restart
        raise TransientError(f"{self.spec}: llama-server died during the call and was restarted", unreachable=True)

    async def _traced(self, response: ChatResponse, request: ChatRequest) -> ChatResponse:
        """The response with the model's identity, each sample's prompt token ids (the server's `/tokenize` of
        the prompt text, from `/apply-template` in chat mode), kept only when their count is the server's own
        count of prompt tokens, and its completion ids kept only when the server's `/detokenize` of them is
        the text they were given for (a token the server left out would be missing from it)."""
        response.identity = model_identity(self.shared.key[0])
        traces = [c.trace for c in response.choices if c.trace is not None]
        if not traces:
            return response
        try:
            async with httpx.AsyncClient(timeout=60) as client:
                for trace in traces:
                    await _check_completion_ids(client, self.shared.handle, trace)
                untokenized = [t for t in traces if t.prompt_ids is None]
                if untokenized:
                    prompt = untokenized[0].prompt_text
                    if prompt is None:
                        prompt = await self._rendered_prompt(client, request)
                    ids = await self._prompt_ids(client, prompt, response.usage.input_tokens)
                    for trace in untokenized:
                        trace.prompt_text, trace.prompt_ids = prompt, ids
        except (httpx.HTTPError, KeyError, ValueError):
            pass  # a finished call is not failed for its training record; what was not checked stays None
        for choice in response.choices:  # what the call journal and the cache keep: no ids spelling a secret
            if choice.trace is not None:
                choice.trace = choice.trace.scrubbed()
        return response

    async def _rendered_prompt(self, client: httpx.AsyncClient, request: ChatRequest) -> str:
        """The prompt exactly as the server reads it: this client's text (completion mode), else the server's
        chat template applied to the messages and tools (`/apply-template`)."""
        prompt = self._prompt_text(request)
        if prompt is not None:
            return prompt
        body: dict[str, Any] = {"messages": oai.to_openai_messages(request.messages)}
        if request.tools:
            body["tools"] = oai.to_openai_tools(request.tools)
        return str((await _post(client, self.shared.handle, "/apply-template", body))["prompt"])

    @property
    def context_window(self) -> int:
        """Tokens one request may use (prompt and reply): the server's context per slot."""
        return self.shared.opts.ctx or embedded_model(self.shared.key[0]).default_ctx

    async def count_prompt_tokens(self, request: ChatRequest) -> int:
        """The prompt's length in the server's own tokens (the template applied, special tokens included)."""
        await self._ensure_running()
        async with httpx.AsyncClient(timeout=60) as client:
            prompt = await self._rendered_prompt(client, request)
            return len(await self._tokenize(client, prompt, add_special=True, parse_special=True))

    async def _prompt_ids(self, client: httpx.AsyncClient, prompt: str, counted: int) -> list[int] | None:
        """The server's tokens of `prompt` with or without its special start tokens: the variant whose length
        is the server's own count of the call's prompt tokens; None when neither is (not the model's ids)."""
        for add_special in (True, False):
            ids = await self._tokenize(client, prompt, add_special=add_special, parse_special=True)
            if len(ids) == counted:
                return ids
        return None

    def _prompt_text(self, request: ChatRequest) -> str | None:
        """The prompt as text when this client gives it (a raw request's, completion mode's); None when the
        server renders it."""
        return request.raw_prompt if request.raw else None

    def _extended(self, waited_s: float) -> None:
        self.shared.say_once("extended", f"{self.spec}: a request is still running after {waited_s:.0f} s; the "
                             "server is making progress, so it is waited for (not retried from the start)")

    def _parts(self, request: ChatRequest) -> list[ChatRequest]:
        """Requests of at most the server's slots of samples, each seeded after the samples before it."""
        slots = self.shared.handle.launch.slots or request.n
        return [request.model_copy(update={"n": min(slots, request.n - offset),
                                           "seed": None if request.seed is None else request.seed + offset})
                for offset in range(0, request.n, slots)]

    async def _call(self, request: ChatRequest) -> ChatResponse:
        """The response with its output tokens summed over all its samples (the server counts the first one)."""
        response: ChatResponse = await super()._call(request)  # type: ignore[misc]
        if len(response.choices) < 2:
            return response
        try:
            async with httpx.AsyncClient(timeout=60) as client:
                others = 0
                for choice in response.choices[1:]:
                    tokens = await self._tokenize(client, choice.message.content or "")
                    others += len(tokens) + (choice.finish_reason == "stop")  # + end token
        except (httpx.HTTPError, KeyError, ValueError):
            return response  # the usage stays an undercount rather than failing a finished call
        usage = response.usage.model_copy(update={"output_tokens": response.usage.output_tokens + others})
        return response.model_copy(update={"usage": usage})

    async def aclose(self) -> None:
        await super().aclose()  # type: ignore[misc]
        if not self._released:
            self._released = True
            await asyncio.to_thread(_release, self.shared)


async def _post(client: httpx.AsyncClient, handle: ServerHandle, path: str, body: dict[str, Any]) -> Any:
    """The JSON reply of one of the server's own endpoints (`/tokenize`, `/detokenize`, `/apply-template`)."""
    reply = await client.post(handle.url(path), headers=handle.headers, json=body)
    reply.raise_for_status()
    return reply.json()


async def _check_completion_ids(client: httpx.AsyncClient, handle: ServerHandle, trace: TokenTrace) -> None:
    """Leave out `trace`'s completion ids and log-probs (saying why) unless the server's `/detokenize` of the
    ids is the trace's text: the server's ids then hold every token of the reply."""
    if trace.completion_ids is None or not trace.completion_ids:
        return
    reply = await _post(client, handle, "/detokenize", {"tokens": trace.completion_ids})
    if str(reply["content"]) != trace.completion_text:
        trace.completion_ids, trace.logprobs = None, None
        trace.missing = ("the server's token ids do not spell the reply (a token was left out of its log-probs); "
                         "the ids are not recorded")


def model_identity(name: str) -> dict[str, str]:
    """What a local model is: the embedded model's name, its GGUF file's pinned (and verified) SHA-256, and
    the llama.cpp build serving it."""
    from agentflow.serving.setup import LLAMA_CPP_PYTHON_VERSION

    model = embedded_model(name)
    return {"backend": "llama.cpp llama-server", "llama_cpp_python": LLAMA_CPP_PYTHON_VERSION,
            "model": model.name, "file": model.file_name, "file_sha256": model.sha256}


async def _died(handle: ServerHandle) -> bool:
    """True when the server is gone (a connection error may arrive a moment before the exit is visible)."""
    for _ in range(10):
        if not handle.alive:
            return True
        await asyncio.sleep(0.05)
    return False


class LocalChatModel(_ServerBacked, OpenAIChatModel):
    """Chat mode (`/v1/chat/completions`) against a managed llama-server."""

    def _stream_kwargs(self, request: ChatRequest) -> dict[str, Any]:
        kw = OpenAIChatModel._stream_kwargs(self, request)
        kw["stream_options"] = {"include_usage": True}  # the prompt's token count, which its ids are checked by
        if request.tools:  # llama-server refuses log-probs on a stream that offers tools
            kw.pop("logprobs", None)
            kw.pop("top_logprobs", None)
        return kw

    async def _stream_once(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        # a dead server surfaces as a connection error, which RemoteModel.stream retries before the first token
        await self._ensure_running()
        async for delta in OpenAIChatModel._stream_once(self, request):
            if delta.response is not None:
                if request.tools:
                    for choice in delta.response.choices:
                        choice.trace = TokenTrace(completion_text=choice.message.content or "",
                                                  source=STREAM_SOURCE, missing=STREAM_WITH_TOOLS)
                delta = delta.model_copy(update={"response": await self._traced(delta.response, request)})
            yield delta


class LocalCompletionModel(_ServerBacked, CompletionChatModel):
    """Text-completion mode (`/v1/completions` with a few-shot template) against a managed llama-server."""

    def _prompt_text(self, request: ChatRequest) -> str | None:
        return super()._prompt_text(request) if request.raw else self.template.render(request.messages)


def load_local_model(name: str, **options: Any) -> ChatModel:
    """Start (or share) a llama-server for embedded model `name` and return a ChatModel for it. Options: those
    of `LocalServingOptions` plus any `ModelOptions`."""
    model = embedded_model(name)
    local = validate_config(LocalServingOptions, {k: v for k, v in options.items() if k in _LOCAL_FIELDS},
                            source=f"options of model 'local:{name}'")
    rest = {k: v for k, v in options.items() if k not in _LOCAL_FIELDS}
    if "api_key" in rest or "base_url" in rest:
        raise UserError(f"local:{name} manages its own server; api_key and base_url cannot be set",
                        hint="use an openai-compatible: spec to talk to a server you run yourself")
    parallel = local.parallel or model.default_parallel
    rest.setdefault("concurrency", parallel)
    # a fixed client-side timeout would abandon work a slow CPU server goes on doing, then send it again: unless
    # one is given, the server's measured pace decides (the HTTP timeout is only a ceiling)
    shared = _acquire(name, local)
    paced = "timeout_s" not in rest and shared.pace is not None
    rest.setdefault("timeout_s", LOCAL_HARD_TIMEOUT_S if paced else LOCAL_TIMEOUT_S)
    try:
        model_options = validate_config(ModelOptions, {**rest, "api_key": shared.handle.api_key},
                                        source=f"options of model 'local:{name}'")
        mode = model.profile.mode if local.mode == "auto" else local.mode
        if mode == "completion":
            built: _ServerBacked = LocalCompletionModel(f"local:{name}", shared, model_options, template=local.template)
        else:
            built = LocalChatModel(f"local:{name}", shared, model_options)
        built.paced = paced
        return built  # type: ignore[return-value]
    except BaseException:
        _release(shared)
        raise
