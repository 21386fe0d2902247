"""Coalesce concurrent samples of one prompt into one request with `n`, so a server that shares the prompt
(llama-server's `n_cmpl`, vLLM, OpenAI) evaluates it once instead of once per sample.

`SampleBatcher(model)` holds a single-sample request for `window_s`; requests that arrive meanwhile and
differ only in their seed join it, up to `max_n`. Each caller gets its own choice back. The prompt's input
tokens are charged to the first caller and the output tokens are split evenly, so totals stay right.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from agentflow.models.base import ChatModel, ChatRequest, ChatResponse, ModelWrapper, Usage

__all__ = ["SampleBatcher"]


@dataclass
class _Group:
    request: ChatRequest
    waiters: list[asyncio.Future[ChatResponse]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None


class SampleBatcher(ModelWrapper):
    """A ChatModel that sends concurrent single-sample requests of the same prompt as one `n` request."""

    def __init__(self, inner: ChatModel, *, max_n: int = 8, window_s: float = 0.05) -> None:
        super().__init__(inner)
        self.max_n = max_n
        self.window_s = window_s
        self._open: dict[str, _Group] = {}
        self.requests_sent = 0
        """Requests that reached the inner model (fewer than the calls when samples were coalesced)."""

    async def chat(self, request: ChatRequest) -> ChatResponse:
        if request.n != 1 or self.max_n < 2:
            self.requests_sent += 1
            return await self.inner.chat(request)
        loop = asyncio.get_running_loop()
        key = request.model_copy(update={"seed": None}).model_dump_json()
        group = self._open.get(key)
        if group is None:
            group = self._open[key] = _Group(request)
            loop.call_later(self.window_s, self._launch, key, group)
        waiter: asyncio.Future[ChatResponse] = loop.create_future()
        group.waiters.append(waiter)
        if len(group.waiters) >= self.max_n:
            self._launch(key, group)
        try:
            return await waiter
        except asyncio.CancelledError:
            # the call goes on for the others; when nobody waits any more, it is abandoned
            if group.task is not None and all(w.cancelled() for w in group.waiters):
                group.task.cancel()
            raise

    def _launch(self, key: str, group: _Group) -> None:
        if group.task is not None:
            return
        if self._open.get(key) is group:
            del self._open[key]
        group.task = asyncio.get_running_loop().create_task(self._run(group))

    async def _run(self, group: _Group) -> None:
        waiters = [w for w in group.waiters if not w.cancelled()]
        if not waiters:
            return
        self.requests_sent += 1
        try:
            response = await self.inner.chat(group.request.model_copy(update={"n": len(waiters)}))
        except Exception as exc:  # noqa: BLE001 - every caller sees the failure, whatever it is
            for w in waiters:
                if not w.done():
                    w.set_exception(exc)
            return
        except BaseException:
            for w in waiters:
                w.cancel()
            raise
        for i, w in enumerate(waiters):
            if w.done():
                continue
            if i >= len(response.choices):
                w.set_exception(RuntimeError(f"{self.spec}: asked for {len(waiters)} samples, got "
                                             f"{len(response.choices)}"))
                continue
            w.set_result(_share(response, i, len(waiters)))

    async def aclose(self) -> None:
        for group in list(self._open.values()):
            if group.task is not None:
                group.task.cancel()
                with contextlib.suppress(BaseException):
                    await group.task
        await self.inner.aclose()


def _share(response: ChatResponse, i: int, count: int) -> ChatResponse:
    """Caller i's part of a coalesced response: its choice, the prompt's tokens if first, an even share of
    the output tokens and of the cost."""
    usage = response.usage
    out = usage.output_tokens // count + (1 if i < usage.output_tokens % count else 0)
    share = Usage(input_tokens=usage.input_tokens if i == 0 else 0, output_tokens=out,
                  cost_usd=None if usage.cost_usd is None else usage.cost_usd / count)
    return response.model_copy(update={"choices": [response.choices[i]], "usage": share})
