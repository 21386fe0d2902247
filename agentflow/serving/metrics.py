"""Read a server's Prometheus `/metrics` into a few named figures, and write them to a run's events.

vLLM names (V1 engine, with the V0 names as fallbacks): `vllm:num_requests_running`,
`vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc` (V0: `vllm:gpu_cache_usage_perc`),
`vllm:prefix_cache_hits_total` / `vllm:prefix_cache_queries_total` (V0: `vllm:gpu_prefix_cache_hit_rate`).
llama-server (started with `--metrics`): `llamacpp:requests_processing`, `llamacpp:requests_deferred`,
`llamacpp:tokens_predicted_total`, `llamacpp:prompt_tokens_total`, `llamacpp:predicted_tokens_seconds`,
`llamacpp:n_busy_slots_per_decode`.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from agentflow.events.kinds import ServerMetrics

if TYPE_CHECKING:
    from agentflow.events import EventLog
    from agentflow.serving.server import ServerHandle

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def parse_prometheus(text: str) -> dict[str, float]:
    """Metric name -> value, summed over label sets (comments and histogram buckets are skipped)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        name, _, raw = match.groups()
        if name.endswith("_bucket"):
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        if math.isnan(value):
            continue
        out[name] = out.get(name, 0.0) + value
    return out


def _first(values: dict[str, float], *names: str) -> float | None:
    for name in names:
        if name in values:
            return values[name]
    return None


def summarize_vllm(values: dict[str, float]) -> dict[str, float | None]:
    hits = _first(values, "vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits",
                  "vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits")
    queries = _first(values, "vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries",
                     "vllm:gpu_prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries")
    if hits is not None and queries:
        hit_rate: float | None = hits / queries
    else:
        hit_rate = _first(values, "vllm:gpu_prefix_cache_hit_rate")
    return {
        "requests_running": _first(values, "vllm:num_requests_running"),
        "requests_waiting": _first(values, "vllm:num_requests_waiting"),
        "kv_cache_usage": _first(values, "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "prefix_cache_hit_rate": hit_rate,
        "prompt_tokens_total": _first(values, "vllm:prompt_tokens_total"),
        "generation_tokens_total": _first(values, "vllm:generation_tokens_total"),
    }


def summarize_llamacpp(values: dict[str, float]) -> dict[str, float | None]:
    return {
        "requests_running": _first(values, "llamacpp:requests_processing"),
        "requests_waiting": _first(values, "llamacpp:requests_deferred"),
        "prompt_tokens_total": _first(values, "llamacpp:prompt_tokens_total"),
        "generation_tokens_total": _first(values, "llamacpp:tokens_predicted_total"),
        "generation_tokens_per_s": _first(values, "llamacpp:predicted_tokens_seconds"),
        "busy_slots_per_decode": _first(values, "llamacpp:n_busy_slots_per_decode"),
    }


def summarize(kind: str, text: str) -> dict[str, float | None]:
    values = parse_prometheus(text)
    return summarize_vllm(values) if kind == "vllm" else summarize_llamacpp(values)


def _metrics_event(handle: ServerHandle, events: EventLog, figures: Any, node_id: str | None,
                   extra: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {"server": handle.kind, "model": handle.model, **extra}
    if isinstance(figures, BaseException):  # metrics are advisory: record why they are missing
        data["error"] = f"{type(figures).__name__}: {figures}"[:300]
    else:
        data.update(figures)
    events.write(ServerMetrics(node_id=node_id, **data))

    return data


async def emit_metrics(handle: ServerHandle, events: EventLog, *, node_id: str | None = None,
                       **extra: Any) -> dict[str, Any]:
    """Read the server's metrics once and write a `server.metrics` event (plus `extra`); returns its data."""
    try:
        figures: Any = await handle.metrics()
    except Exception as exc:  # noqa: BLE001
        figures = exc
    return _metrics_event(handle, events, figures, node_id, extra)


def emit_metrics_sync(handle: ServerHandle, events: EventLog, *, node_id: str | None = None,
                      **extra: Any) -> dict[str, Any]:
    """`emit_metrics` for synchronous callers (e.g. a progress callback after each task)."""
    try:
        figures: Any = handle.metrics_sync()
    except Exception as exc:  # noqa: BLE001
        figures = exc
    return _metrics_event(handle, events, figures, node_id, extra)


@contextlib.asynccontextmanager
async def report_metrics(handle: ServerHandle, events: EventLog, *, interval_s: float = 5.0,
                         node_id: str | None = None) -> AsyncIterator[None]:
    """Write `server.metrics` events every `interval_s` seconds while the block runs, and once at its end."""

    async def loop() -> None:
        while True:
            await asyncio.sleep(interval_s)
            if handle.alive:
                await emit_metrics(handle, events, node_id=node_id)

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if handle.alive:
            await emit_metrics(handle, events, node_id=node_id)
