"""Read a server's Prometheus `/metrics` into a few named figures (`metric_events` writes them to a run's
events).

vLLM names (V1 engine, with the V0 names as fallbacks): `vllm:num_requests_running`,
`vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc` (V0: `vllm:gpu_cache_usage_perc`),
`vllm:prefix_cache_hits_total` / `vllm:prefix_cache_queries_total` (V0: `vllm:gpu_prefix_cache_hit_rate`).
llama-server (started with `--metrics`): `llamacpp:requests_processing`, `llamacpp:requests_deferred`,
`llamacpp:tokens_predicted_total`, `llamacpp:prompt_tokens_total`, `llamacpp:predicted_tokens_seconds`,
`llamacpp:n_busy_slots_per_decode`.
"""

from __future__ import annotations

import math
import re

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def parse_prometheus(text: str) -> dict[str, float]:
    """Metric name -> value, summed over label sets (comments and histogram buckets are skipped)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)  # no match for a blank line or a `#` comment
        if match is None or match.group(1).endswith("_bucket"):
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        if not math.isnan(value):
            out[match.group(1)] = out.get(match.group(1), 0.0) + value
    return out


def _first(values: dict[str, float], *names: str) -> float | None:
    return next((values[name] for name in names if name in values), None)


def summarize_vllm(values: dict[str, float]) -> dict[str, float | None]:
    hits = _first(values, "vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits",
                  "vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits")
    queries = _first(values, "vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries",
                     "vllm:gpu_prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries")
    hit_rate = hits / queries if hits is not None and queries else _first(values, "vllm:gpu_prefix_cache_hit_rate")
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
