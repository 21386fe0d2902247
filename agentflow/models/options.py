"""Options every remote backend accepts: `load_model(spec, **options)` validates them against `ModelOptions`."""

from __future__ import annotations

import os

from pydantic import Field

from agentflow.config import StrictConfig
from agentflow.errors import UserError


class ModelOptions(StrictConfig):
    """How a backend connects, retries, limits concurrency, caches and prices its calls."""

    api_key: str | None = None
    """API key; by default read from the backend's environment variable (never put it in a config file)."""
    base_url: str | None = None
    """Override the provider's endpoint (e.g. a proxy, or a loopback test server)."""
    timeout_s: float = Field(default=120.0, gt=0)
    """Seconds before one HTTP attempt times out (a timeout is retried)."""
    max_attempts: int = Field(default=4, ge=1)
    """Attempts per call for transient failures (429, 5xx, timeouts, connection resets); 1 = no retry."""
    retry_initial_s: float = Field(default=1.0, ge=0)
    """First backoff wait in seconds; later waits grow exponentially with full jitter."""
    retry_max_wait_s: float = Field(default=30.0, ge=0)
    """Longest single wait between attempts, a server's Retry-After included."""
    concurrency: int = Field(default=8, ge=1)
    """Calls in flight at once through this model object (further calls queue)."""
    cache: bool | str = False
    """On-disk response cache: True = `<cache_dir>/responses.sqlite`, a string = that SQLite file, False = off."""
    cache_force: bool = False
    """Cache every call, not only deterministic ones (temperature 0 or a seed set)."""
    default_max_tokens: int = Field(default=4096, ge=1)
    """max_tokens sent when the request sets none and the provider requires one (Anthropic)."""
    price_in_per_mtok: float | None = Field(default=None, ge=0)
    """USD per million input tokens; overrides the built-in price table."""
    price_out_per_mtok: float | None = Field(default=None, ge=0)
    """USD per million output tokens; overrides the built-in price table."""
    stream_usage: bool = True
    """Ask OpenAI-style servers to report token usage at the end of a stream."""


HOSTED_KEYS = {"openai": ("OpenAI", "OPENAI_API_KEY"), "anthropic": ("Anthropic", "ANTHROPIC_API_KEY")}
"""Provider scheme -> (its name, the environment variable holding its API key)."""


def hosted_api_key(scheme: str, spec: str, given: str | None) -> str:
    """The API key of a hosted provider's model: `given` (the api_key option), else its environment variable;
    a one-line UserError naming the variable when neither is set. The same check runs before a run creates
    anything (`spec.check_can_start`) and when the client is built."""
    name, env = HOSTED_KEYS[scheme]
    key = given or os.environ.get(env)
    if not key:
        raise UserError(f"{spec}: no {name} API key", hint=f"set {env}")
    return key
