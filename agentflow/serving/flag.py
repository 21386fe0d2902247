"""`--serve KIND:MODEL` for `agentflow run` / `repair`: start a server for the run and hand back its handle.

    async with served("vllm:Qwen/Qwen2.5-Coder-7B-Instruct") as handle:
        model = handle.load_model()          # or load_model(handle.spec, api_key=handle.api_key)

Accepted: `vllm:MODEL`, `llamacpp:MODEL` (an embedded name or a GGUF path), `llamacpp` (= gemma3-270m),
`local:NAME` (same as `llamacpp:NAME`). Extra options are `key=value` pairs after a comma:
`vllm:MODEL,max_model_len=8192,gpu_memory_utilization=0.85`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import yaml

from agentflow.config import validate_config
from agentflow.errors import UserError
from agentflow.serving.server import LogCallback, ServerHandle

FORMS = "vllm:MODEL[,key=value...] or llamacpp:MODEL[,key=value...]"


def parse_serve_flag(value: str) -> tuple[str, dict[str, Any]]:
    """`(kind, options)` from a `--serve` value; a bad value is a one-line UserError."""
    text = value.strip()
    kind, _, rest = text.partition(":")
    kind = {"local": "llamacpp", "llama.cpp": "llamacpp"}.get(kind, kind)
    if kind not in ("vllm", "llamacpp"):
        raise UserError(f"bad --serve value {value!r}: unknown server {kind!r}", hint=f"use {FORMS}")
    model, *pairs = rest.split(",") if rest else ["gemma3-270m" if kind == "llamacpp" else ""]
    if not model.strip():
        raise UserError(f"bad --serve value {value!r}: missing model after '{kind}:'", hint=f"use {FORMS}")
    options: dict[str, Any] = {"model": model.strip()}
    for pair in pairs:
        key, eq, raw = pair.partition("=")
        if not eq or not key.strip():
            raise UserError(f"bad --serve value {value!r}: {pair!r} is not key=value", hint=f"use {FORMS}")
        options[key.strip()] = yaml.safe_load(raw) if raw.strip() else ""
    return kind, options


async def start_from_flag(value: str, *, on_log: LogCallback | None = None) -> ServerHandle:
    """Start the server a `--serve` value names (stop it with `await handle.stop()` or `async with`)."""
    import asyncio

    kind, options = parse_serve_flag(value)
    if kind == "vllm":
        from agentflow.serving.vllm import VllmServerOptions, start_vllm

        return await start_vllm(validate_config(VllmServerOptions, options, source="--serve"), on_log=on_log)
    from agentflow.serving.llamacpp import LlamaServerOptions, llamacpp_launch

    opts = validate_config(LlamaServerOptions, options, source="--serve")
    launch = await asyncio.to_thread(llamacpp_launch, opts)
    return await ServerHandle(launch, port=opts.port).start(on_log)


@contextlib.asynccontextmanager
async def served(value: str, *, on_log: LogCallback | None = None) -> AsyncIterator[ServerHandle]:
    """`async with served("vllm:MODEL") as handle:` — started on entry, stopped (with its children) on exit."""
    handle = await start_from_flag(value, on_log=on_log)
    try:
        yield handle
    finally:
        await handle.stop()
