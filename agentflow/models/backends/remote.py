"""Shared machinery of the HTTP backends: retries, a concurrency limit, latency, pricing, `n` emulation.

A backend subclasses `RemoteModel` and implements `_chat_once` (one HTTP call, provider exceptions passed
through) and optionally `_stream_once`. Retries happen only before the first streamed token.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from agentflow.errors import UserError
from agentflow.models.backends.retry import TransientError, backoff_s, classify, gave_up
from agentflow.models.base import ChatRequest, ChatResponse, Choice, StreamDelta, Usage, as_deltas
from agentflow.models.options import ModelOptions
from agentflow.models.pricing import cost_usd, lookup_price
from agentflow.secrets import register_secret


def merge_responses(parts: list[ChatResponse]) -> ChatResponse:
    """One response holding the choices of several single-sample calls, usage summed."""
    choices: list[Choice] = [c for p in parts for c in p.choices]
    first = parts[0] if parts else ChatResponse(choices=[])
    return ChatResponse(choices=choices, usage=sum((p.usage for p in parts), Usage()), model=first.model,
                        identity=dict(first.identity))


class RemoteModel:
    """Base of the provider backends. Safe to share across tasks of one event loop."""

    native_n: bool = True
    """False when the provider cannot return several samples per call (they are then requested concurrently)."""
    key_env: str | None = None
    """Environment variable holding the API key (named in error messages)."""
    takes_raw: bool = False
    """Whether the provider has a text-completion endpoint for `ChatRequest.raw` prompts."""

    def __init__(self, spec: str, model: str, options: ModelOptions) -> None:
        self.spec = spec
        self.model = model
        self.options = options
        register_secret(options.api_key)
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._semaphore = asyncio.Semaphore(options.concurrency)

    def _bind_loop(self) -> None:
        """Semaphores and HTTP connections belong to one event loop; start afresh when used from another."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            if self._loop is not None:
                self._client = None  # its connections belong to the old loop
                self._semaphore = asyncio.Semaphore(self.options.concurrency)
            self._loop = loop

    # --- what a backend implements -------------------------------------------------------------
    async def _chat_once(self, request: ChatRequest) -> ChatResponse:
        raise NotImplementedError

    def _stream_once(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        """Default: no streaming API, so the whole reply arrives as one piece."""
        return self._stream_fallback(request)

    def _parts(self, request: ChatRequest) -> list[ChatRequest]:
        """The requests a call is sent as: itself, or one per sample when the provider cannot give `n`."""
        return [request] if self.native_n else [request.model_copy(update={"n": 1})] * request.n

    def _prices(self) -> tuple[float, float] | None:
        if self.options.price_in_per_mtok is not None or self.options.price_out_per_mtok is not None:
            return (self.options.price_in_per_mtok or 0.0, self.options.price_out_per_mtok or 0.0)
        return lookup_price(self.model)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    # --- the ChatModel interface ---------------------------------------------------------------
    def _check_raw(self, request: ChatRequest) -> None:
        if request.raw and not self.takes_raw:
            raise UserError(f"{self.spec}: this provider has no text-completion endpoint for a raw prompt",
                            hint="send raw requests to a model on an OpenAI-compatible server (local:, openai-compatible:)")

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self._check_raw(request)
        self._bind_loop()
        start = time.monotonic()
        parts = self._parts(request) if request.n > 1 else [request]
        if len(parts) == 1:
            response = await self._call(parts[0])
        else:
            response = merge_responses(list(await asyncio.gather(*(self._call(part) for part in parts))))
        return self._finish(response, start)

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        self._check_raw(request)
        self._bind_loop()
        start = time.monotonic()
        if (request.n > 1 and not self.native_n) or request.raw:  # a raw completion arrives whole
            async for delta in as_deltas(await self.chat(request)):
                yield delta
            return
        attempts = 0
        while True:
            attempts += 1
            started = False
            try:
                async with self._semaphore:
                    async for delta in self._stream_once(request):
                        if delta.response is not None:
                            delta = delta.model_copy(update={"response": self._finish(delta.response, start)})
                        started = True
                        yield delta
                return
            except Exception as exc:  # noqa: BLE001 - classified
                await self._before_retry(exc, attempts, started)

    # --- helpers ---------------------------------------------------------------------------------
    async def _call(self, request: ChatRequest) -> ChatResponse:
        attempts = 0
        while True:
            attempts += 1
            try:
                async with self._semaphore:
                    return await self._chat_once(request)
            except Exception as exc:  # noqa: BLE001 - classified
                await self._before_retry(exc, attempts, False)

    async def _before_retry(self, exc: Exception, attempts: int, started: bool) -> None:
        """After a failed attempt, raise the failure as one of ours unless it is transient, nothing was
        streamed yet and attempts are left; then wait before the next one."""
        mapped = classify(exc, self.spec, self.key_env)
        if started or not isinstance(mapped, TransientError):
            raise mapped from None
        if attempts >= self.options.max_attempts:
            raise gave_up(mapped, attempts) from None
        options = self.options
        await asyncio.sleep(backoff_s(mapped, attempts, options.retry_initial_s, options.retry_max_wait_s))

    def _finish(self, response: ChatResponse, start: float) -> ChatResponse:
        response.latency_s = time.monotonic() - start
        response.usage.cost_usd = cost_usd(response.usage, self._prices())
        return response

    async def _stream_fallback(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        async for delta in as_deltas(await self._chat_once(request)):
            yield delta
