"""`--serve KIND:MODEL` for `agentflow run` / `repair`: start a server for the run and hand back its handle.

    async with served("vllm:Qwen/Qwen2.5-Coder-7B-Instruct") as handle:
        model = served_model(handle)          # or load_model(handle.spec, api_key=handle.api_key)

Accepted: `vllm:MODEL`, `llamacpp:MODEL` (an embedded name or a GGUF path), `llamacpp` (= gemma3-270m),
`local:NAME` (same as `llamacpp:NAME`). Extra options are `key=value` pairs after a comma:
`vllm:MODEL,max_model_len=8192,gpu_memory_utilization=0.85`.

The CLI side (progress, log tail on failure, metrics events) is `agentflow/cli/parts/serve_flag.py`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from agentflow.config import load_yaml, validate_config
from agentflow.errors import UserError
from agentflow.serving.llamacpp import LlamaServerOptions, llamacpp_launch
from agentflow.serving.server import LogCallback, ServerHandle
from agentflow.serving.vllm import VllmServerOptions, vllm_handle

FORMS = "vllm:MODEL[,key=value...] or llamacpp:MODEL[,key=value...]"


def parse_serve_flag(value: str) -> tuple[str, dict[str, Any]]:
    """`(kind, options)` from a `--serve` value; a bad value is a one-line UserError."""
    kind, _, rest = value.strip().partition(":")
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
        options[key.strip()] = load_yaml(raw, f"bad --serve value {value!r}: {key.strip()}") if raw.strip() else ""
    return kind, options


def serve_options(value: str) -> tuple[str, Any]:
    """`(kind, options)`, the options validated (`VllmServerOptions` / `LlamaServerOptions`); starts nothing.

    Call it first thing in a command, so a bad `--serve` value is a one-line error before any work begins.
    """
    kind, options = parse_serve_flag(value)
    schema = VllmServerOptions if kind == "vllm" else LlamaServerOptions
    return kind, validate_config(schema, options, source=f"--serve {value}")


def server_from_flag(value: str, *, say: LogCallback | None = None) -> ServerHandle:
    """A handle, not yet started, for a `--serve` value: llama.cpp's binary and model file are resolved
    (built or assembled if needed, reporting progress to `say`); vLLM must be installed."""
    kind, opts = serve_options(value)
    if kind == "vllm":
        return vllm_handle(opts)
    return ServerHandle(llamacpp_launch(opts, say=say), port=opts.port)


async def start_from_flag(value: str, *, on_log: LogCallback | None = None) -> ServerHandle:
    """Start the server a `--serve` value names (stop it with `await handle.stop()` or `async with`)."""
    import asyncio

    handle = await asyncio.to_thread(server_from_flag, value)
    return await handle.start(on_log)


@contextlib.asynccontextmanager
async def served(value: str, *, on_log: LogCallback | None = None) -> AsyncIterator[ServerHandle]:
    """`async with served("vllm:MODEL") as handle:` — started on entry, stopped (with its children) on exit."""
    handle = await start_from_flag(value, on_log=on_log)
    try:
        yield handle
    finally:
        await handle.stop()
