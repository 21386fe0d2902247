"""Which provider failures are transient and how long to wait before the next attempt.

Both provider SDKs (OpenAI, Anthropic) and LiteLLM raise errors with a `status_code` and the HTTP
`response`; connection problems are `APIConnectionError`/`APITimeoutError`. `classify` turns any of them
into one of ours: `TransientError` (retried), `UserError` (bad key, unknown model: fix and rerun) or
`ModelError` (anything else, one line). SDK-internal retries are off; `RemoteModel` owns retrying.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from typing import Any

from agentflow.errors import ModelError, UserError

_CONNECTION_ERRORS = {"APIConnectionError", "APITimeoutError", "ConnectError", "ReadError", "RemoteProtocolError",
                      "ConnectTimeout", "ReadTimeout", "WriteError", "PoolTimeout", "ServiceUnavailableError"}


class TransientError(ModelError):
    """A failure worth retrying: 408/409/429/5xx, a timeout or a dropped connection."""

    def __init__(self, message: str, *, retry_after: float | None = None, unreachable: bool = False) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.unreachable = unreachable


class ModelUnreachable(ModelError):
    """The server could not be reached (connection refused/reset, timeouts) after every attempt."""


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds a server asked us to wait (`retry-after-ms`, or `Retry-After` as seconds or an HTTP date)."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
    except Exception:  # noqa: BLE001 - headers of an unknown type: no hint
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return None if parsed is None else max(0.0, parsed.timestamp() - time.time())


def _detail(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    message = None
    if isinstance(body, dict):
        err = body.get("error", body)
        message = err.get("message") if isinstance(err, dict) else err
    text = str(message or getattr(exc, "message", None) or exc)
    return " ".join(text.split())[:300]


def classify(exc: BaseException, spec: str, key_env: str | None) -> Exception:
    """Map a provider exception to TransientError / UserError / ModelError (or return it unchanged)."""
    if isinstance(exc, (UserError, ModelError)) or not isinstance(exc, Exception):
        return exc  # type: ignore[return-value]
    status = getattr(exc, "status_code", None)
    names = {c.__name__ for c in type(exc).__mro__}
    if not isinstance(status, int):
        if names & _CONNECTION_ERRORS or isinstance(exc, (ConnectionError, TimeoutError, asyncio.TimeoutError)):
            timed_out = "Timeout" in "".join(names) or isinstance(exc, TimeoutError)
            kind = "timed out" if timed_out else "connection failed"
            return TransientError(f"{spec}: {kind}: {_detail(exc)}", unreachable=True)
        return exc
    if status in (408, 409, 429) or status >= 500:
        response = getattr(exc, "response", None)
        wait = retry_after_seconds(getattr(response, "headers", None))
        return TransientError(f"{spec}: HTTP {status}: {_detail(exc)}", retry_after=wait)
    if status in (401, 403):
        fix = f"set {key_env} to a valid key" if key_env else "pass a valid api_key"
        return UserError(f"{spec}: the API key was rejected (HTTP {status})", hint=fix)
    if status == 404:
        return UserError(f"{spec}: model or endpoint not found (HTTP 404): {_detail(exc)}",
                         hint="check the model name and base URL")
    return ModelError(f"{spec}: request rejected (HTTP {status}): {_detail(exc)}")


def backoff_s(exc: TransientError, attempt: int, initial_s: float, max_wait_s: float) -> float:
    """The wait after failed `attempt` (1-based): the server's Retry-After, else exponential backoff with full
    jitter; both capped at `max_wait_s`."""
    if exc.retry_after is not None:
        return min(exc.retry_after, max_wait_s)
    return min(random.uniform(0, initial_s * 2 ** (attempt - 1)), max_wait_s)


def gave_up(exc: TransientError, attempts: int) -> ModelError:
    """The one-line error for a transient failure that outlasted every attempt."""
    suffix = f" (gave up after {attempts} attempt{'s' if attempts != 1 else ''})"
    return ModelUnreachable(f"{exc}{suffix}") if exc.unreachable else ModelError(f"{exc}{suffix}")
