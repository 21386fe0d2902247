"""llama.cpp's `llama-server`: options, command line, and `start_llamacpp`.

Flags used (llama-server README): `-m`, `--host`, `--port`, `--alias`, `-np/--parallel` (slots decoded together
by continuous batching, `--cont-batching` is on by default), `-c/--ctx-size` (the total; each slot gets
`ctx_size / parallel`, so we pass `ctx * parallel`), `-t/--threads`, `--metrics` (Prometheus `/metrics`),
`--no-webui`. The API key goes through the `LLAMA_API_KEY` environment variable so it never shows in `ps`.
`/health` is public and answers 503 while the model loads, 200 once ready.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from agentflow.config import StrictConfig
from agentflow.errors import UserError
from agentflow.serving.embedded import EMBEDDED
from agentflow.serving.profiles import ModelProfile, default_profile
from agentflow.serving.server import HOST, Launch, LogCallback, ServerHandle
from agentflow.serving.setup import ensure_llama_server, ensure_model


class LlamaServerOptions(StrictConfig):
    """How to run llama-server."""

    model: str = "gemma3-270m"
    """An embedded model name (`gemma3-270m`, `qwen2.5-coder-1.5b`) or a path to a GGUF file."""
    parallel: int | None = Field(default=None, ge=1, le=64)
    """Slots decoded together (`--parallel`); default: the embedded model's default, else 4."""
    ctx: int | None = Field(default=None, ge=256)
    """Context tokens per slot (the server gets `ctx * parallel`); default: the embedded model's, else 4096."""
    threads: int | None = Field(default=None, ge=1)
    """CPU threads (`--threads`); default: llama-server's choice."""
    port: int | str = "auto"
    """TCP port on 127.0.0.1, or `auto` to pick a free one."""
    startup_timeout_s: float = Field(default=120.0, gt=0)
    """Seconds to wait for `/health` to answer 200."""
    binary: str | None = None
    """llama-server executable; default: $AGENTFLOW_LLAMA_SERVER, else the cached build (`agentflow serve setup`)."""
    extra_args: list[str] = Field(default_factory=list)
    """More llama-server flags, passed through as given."""


def llama_server_argv(binary: str | Path, model_path: str | Path, *, port: int, alias: str, parallel: int,
                      ctx: int, threads: int | None = None, extra_args: list[str] | None = None) -> list[str]:
    """The llama-server command line (without the API key, which travels in LLAMA_API_KEY)."""
    argv = [str(binary), "-m", str(model_path), "--host", HOST, "--port", str(port), "--alias", alias,
            "--parallel", str(parallel), "--ctx-size", str(ctx * parallel), "--cont-batching", "--metrics",
            "--no-webui"]
    if threads is not None:
        argv += ["--threads", str(threads)]
    return argv + list(extra_args or [])


def llamacpp_launch(options: LlamaServerOptions, *, say: LogCallback | None = None) -> Launch:
    """Resolve the binary and the model file (building/assembling them if needed) and describe the launch."""
    kwargs: dict[str, Any] = {"say": say} if say is not None else {}
    embedded = EMBEDDED.get(options.model)
    profile: ModelProfile
    if embedded is not None:
        model_path = ensure_model(embedded.name, **kwargs)
        alias, profile = embedded.name, embedded.profile
        parallel = options.parallel or embedded.default_parallel
        ctx = options.ctx or embedded.default_ctx
    else:
        model_path = Path(options.model).expanduser()
        if not model_path.is_file():
            raise UserError(f"model {options.model!r} is neither an embedded model nor a GGUF file",
                            hint=f"use one of {', '.join(EMBEDDED)} or a path to a .gguf file")
        alias, profile = model_path.stem, default_profile()
        parallel, ctx = options.parallel or 4, options.ctx or 4096
    binary = Path(options.binary) if options.binary else ensure_llama_server(**kwargs)
    return Launch(
        kind="llamacpp",
        model=alias,
        argv=lambda port: llama_server_argv(binary, model_path, port=port, alias=alias, parallel=parallel,
                                            ctx=ctx, threads=options.threads, extra_args=options.extra_args),
        api_key_env="LLAMA_API_KEY", startup_timeout_s=options.startup_timeout_s, label=f"llama-server[{alias}]",
        profile=profile, slots=parallel,
    )


async def start_llamacpp(options: LlamaServerOptions | None = None, *, on_log: LogCallback | None = None,
                         **fields: object) -> ServerHandle:
    """Start llama-server and wait until it is healthy: `await start_llamacpp(model="gemma3-270m")`."""
    import asyncio

    opts = options or LlamaServerOptions.model_validate(fields)
    launch = await asyncio.to_thread(llamacpp_launch, opts)
    return await ServerHandle(launch, port=opts.port).start(on_log)
