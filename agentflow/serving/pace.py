"""How long to wait for a request to a llama-server on a CPU: from the server's measured speed, not a fixed number.

A CPU server decoding several requests at once gives each a few tokens per second, and a long prompt takes
minutes before the first token: a fixed client timeout either cuts answers that were arriving or waits an hour
for a server that hung. Here a request's deadline is what the server's `/metrics` counters say it needs (prompt
size over the prompt rate plus the requested tokens over the decode rate, times `slack`, behind the queued
requests); past it, the wait goes on while the server's count of decode steps grows, and only a server that
made no progress for a whole period is given up on (a `TransientError`: the call is retried).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from agentflow.serving.metrics import parse_prometheus

T = TypeVar("T")

CHARS_PER_TOKEN = 3.5
"""Prompt characters per token (code and English for the embedded models' tokenizers), for a size estimate."""


@dataclass
class Pace:
    """Deadline policy of one server."""

    first_deadline_s: float = 900.0
    """Deadline before the server has measured anything (the first request also reads a cold prompt)."""
    slack: float = 3.0
    """Deadline = slack x the time the measured rates predict."""
    floor_s: float = 60.0
    """No deadline shorter than this."""
    recheck_s: float = 60.0
    """After a deadline, how often progress is checked (a period without progress ends the wait)."""


class ServerPace:
    """Measures a llama-server's speed from its `/metrics` and waits for requests accordingly."""

    def __init__(self, metrics_url: str, headers: dict[str, str], pace: Pace | None = None) -> None:
        self.metrics_url, self.headers = metrics_url, headers
        self.pace = pace or Pace()
        self.extended = 0
        """Requests whose deadline passed while the server was still working (the wait went on)."""

    async def counters(self, timeout_s: float = 5.0) -> dict[str, float] | None:
        """The server's counters, or None when it does not answer in time (a hung or stopped server; a server
        reading a long prompt answers only between its decode steps, so rechecks allow a whole period)."""
        try:
            async with httpx.AsyncClient(timeout=timeout_s) as client:
                reply = await client.get(self.metrics_url, headers=self.headers)
                reply.raise_for_status()
        except httpx.HTTPError:
            return None
        return parse_prometheus(reply.text)

    def predict_s(self, counters: dict[str, float] | None, prompt_chars: int, max_tokens: int) -> float | None:
        """Seconds the request should take by the measured rates, queued requests included (None: nothing
        measured yet)."""
        if not counters:
            return None
        prompt_n, prompt_s = counters.get("llamacpp:prompt_tokens_total", 0.0), counters.get("llamacpp:prompt_seconds_total", 0.0)
        out_n, out_s = counters.get("llamacpp:tokens_predicted_total", 0.0), counters.get("llamacpp:tokens_predicted_seconds_total", 0.0)
        if prompt_n <= 0 or out_n <= 0 or prompt_s <= 0 or out_s <= 0:
            return None
        one = (prompt_chars / CHARS_PER_TOKEN) / (prompt_n / prompt_s) + max_tokens / (out_n / out_s)
        slots = max(1.0, counters.get("llamacpp:requests_processing", 0.0))
        waiting = counters.get("llamacpp:requests_deferred", 0.0)
        return one * (1.0 + waiting / slots)

    def deadline_s(self, counters: dict[str, float] | None, prompt_chars: int, max_tokens: int) -> float:
        predicted = self.predict_s(counters, prompt_chars, max_tokens)
        if predicted is None:
            return self.pace.first_deadline_s
        return max(self.pace.floor_s, self.pace.slack * predicted)

    async def wait(self, call: Callable[[], Awaitable[T]], *, prompt_chars: int, max_tokens: int,
                   on_extend: Callable[[float], Any] | None = None) -> T:
        """Run `call`; past its deadline keep waiting while the server's decode count grows, else cancel it
        and raise `TransientError`."""
        from agentflow.models.backends.retry import TransientError

        before = await self.counters()
        deadline = self.deadline_s(before, prompt_chars, max_tokens)
        task = asyncio.ensure_future(call())
        started = before_at = time.monotonic()
        past_deadline = False
        try:
            wait_s = deadline
            while True:
                done, _ = await asyncio.wait({task}, timeout=wait_s)
                if task in done:
                    return task.result()
                now = await self.counters(timeout_s=max(5.0, self.pace.recheck_s))
                progressed = _progressed(before, now)
                quiet_s = time.monotonic() - before_at
                if progressed or quiet_s < self.pace.recheck_s:  # a period without progress ends the wait
                    if not past_deadline:
                        past_deadline = True
                        self.extended += 1
                        if on_extend is not None:
                            on_extend(time.monotonic() - started)
                    if progressed:
                        before, before_at, wait_s = now, time.monotonic(), self.pace.recheck_s
                    else:  # judged over a whole period: one decode step of a long prompt can take a while
                        wait_s = self.pace.recheck_s - quiet_s
                    continue
                await _cancel(task)
                raise TransientError(
                    f"the model server made no progress for {quiet_s:.0f} s "
                    f"(request waited {time.monotonic() - started:.0f} s; deadline {deadline:.0f} s)",
                    unreachable=now is None,
                )
        finally:
            if not task.done():
                await _cancel(task)


async def _cancel(task: asyncio.Future[Any]) -> None:
    """Cancel the call and wait until it has let go of its connection."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


def _progressed(before: dict[str, float] | None, now: dict[str, float] | None) -> bool:
    """The server ran decode steps between the two readings (prompt or generation, for any request)."""
    if now is None:
        return False
    key = "llamacpp:n_decode_total"
    return now.get(key, 0.0) > (before or {}).get(key, 0.0)


__all__ = ["CHARS_PER_TOKEN", "Pace", "ServerPace"]
