"""`agentflow serve ...`: run a local OpenAI-compatible server (llama.cpp or vLLM) in the foreground."""

from __future__ import annotations

from typing import Any

import typer

from agentflow.cli.common import JSON_OPTION, print_json
from agentflow.errors import UserError

PORT_HELP = "TCP port on 127.0.0.1, or 'auto' for a free one."


def register(app: typer.Typer) -> None:
    sub = typer.Typer(help="Local model servers: llama.cpp (CPU) and vLLM (GPU), plus their one-time set-up.",
                      no_args_is_help=True)
    app.add_typer(sub, name="serve")

    @sub.command("setup")
    def setup_cmd(
        models: str = typer.Option("all", "--models", help="Models to assemble: all, small, default, none, or a name."),
        build: bool = typer.Option(True, "--build/--no-build", help="Build the llama-server binary if missing."),
        as_json: bool = JSON_OPTION,
    ) -> None:
        """Build llama-server (once, cached) and assemble + verify the embedded models. Idempotent."""
        from agentflow.serving.setup import setup

        done = setup(models, build=build)
        if as_json:
            print_json(done)
        else:
            for name, path in done.items():
                typer.echo(f"{name}: {path}")

    @sub.command("status")
    def status_cmd(as_json: bool = JSON_OPTION) -> None:
        """Show what the set-up has installed (nothing is built or assembled)."""
        from agentflow.serving.setup import status

        info = status()
        if as_json:
            print_json(info)
            return
        typer.echo(f"llama-server: {info['llama_server'] or 'missing (run: agentflow serve setup)'}")
        for name, m in info["models"].items():  # type: ignore[attr-defined]
            state = "verified" if m["verified"] else ("assembled, unverified" if m["assembled"] else "missing")
            typer.echo(f"local:{name}: {state} ({m['path']})")

    @sub.command("llamacpp")
    def llamacpp_cmd(
        model: str = typer.Argument("gemma3-270m", help="Embedded model name (gemma3-270m, qwen2.5-coder-1.5b) or a GGUF path."),
        extra: list[str] | None = typer.Argument(None, help="Extra llama-server flags, after '--'."),
        parallel: int | None = typer.Option(None, "--parallel", "-np", help="Slots decoded together."),
        ctx: int | None = typer.Option(None, "--ctx", help="Context tokens per slot."),
        threads: int | None = typer.Option(None, "--threads", help="CPU threads."),
        port: str = typer.Option("auto", "--port", help=PORT_HELP),
        startup_timeout: float = typer.Option(120.0, "--startup-timeout", help="Seconds to wait for health."),
        as_json: bool = JSON_OPTION,
    ) -> None:
        """Serve a GGUF model with llama.cpp's llama-server until Ctrl-C."""
        from agentflow.serving.llamacpp import LlamaServerOptions, llamacpp_launch
        from agentflow.serving.server import ServerHandle

        extra_args = list(extra or [])
        if model.startswith("-"):  # `serve llamacpp -- --flag`: everything after -- is extra
            extra_args.insert(0, model)
            model = "gemma3-270m"
        options = _validated(LlamaServerOptions, model=model, parallel=parallel, ctx=ctx, threads=threads,
                             port=_port(port), startup_timeout_s=startup_timeout, extra_args=extra_args)
        launch = llamacpp_launch(options, say=lambda m: typer.echo(f"agentflow: {m}", err=True))
        _serve_foreground(ServerHandle(launch, port=options.port), as_json)

    @sub.command("vllm")
    def vllm_cmd(
        model: str = typer.Argument(..., help="Hugging Face model id or local path."),
        extra: list[str] | None = typer.Argument(None, help="Extra 'vllm serve' flags, after '--'."),
        port: str = typer.Option("auto", "--port", help=PORT_HELP),
        gpu_memory_utilization: float | None = typer.Option(None, "--gpu-memory-utilization", help="Fraction of GPU memory for vLLM."),
        max_model_len: int | None = typer.Option(None, "--max-model-len", help="Context length."),
        tensor_parallel_size: int | None = typer.Option(None, "--tensor-parallel-size", help="GPUs to shard over."),
        enable_prefix_caching: bool = typer.Option(False, "--enable-prefix-caching", help="Turn on automatic prefix caching."),
        served_model_name: str | None = typer.Option(None, "--served-model-name", help="Name clients use; default MODEL."),
        tool_call_parser: str | None = typer.Option(None, "--tool-call-parser", help="Enable tool calls with this parser."),
        startup_timeout: float = typer.Option(900.0, "--startup-timeout", help="Seconds to wait for health."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the command line and environment, start nothing."),
        as_json: bool = JSON_OPTION,
    ) -> None:
        """Serve a model with vLLM (needs 'agentflow[vllm]' and a GPU) until Ctrl-C."""
        from agentflow.serving.server import ServerHandle
        from agentflow.serving.vllm import VllmServerOptions, vllm_argv, vllm_available, vllm_env, vllm_launch

        options = _validated(VllmServerOptions, model=model, port=_port(port),
                             gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
                             tensor_parallel_size=tensor_parallel_size,
                             enable_prefix_caching=True if enable_prefix_caching else None,
                             served_model_name=served_model_name, tool_call_parser=tool_call_parser,
                             startup_timeout_s=startup_timeout, extra_args=list(extra or []))
        if dry_run:
            shown_port = options.port if isinstance(options.port, int) else 0
            env = vllm_env(api_key="<generated>")
            if as_json:
                print_json({"argv": vllm_argv(options, port=shown_port), "env": env})
            else:
                import shlex

                typer.echo(" ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " "
                           + shlex.join(vllm_argv(options, port=shown_port)))
            return
        reason = vllm_available()
        if reason is not None:
            raise UserError(f"cannot serve with vLLM: {reason}", hint="use 'agentflow serve llamacpp' on CPU")
        _serve_foreground(ServerHandle(vllm_launch(options), port=options.port), as_json)


def _port(value: str) -> int | str:
    if value == "auto":
        return "auto"
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise UserError(f"--port {value!r} is not a port number", hint="use 1-65535 or 'auto'")
    return int(value)


def _validated(cls: Any, **fields: Any) -> Any:
    from agentflow.config import validate_config

    return validate_config(cls, {k: v for k, v in fields.items() if v is not None}, source="serve options")


def _serve_foreground(handle: Any, as_json: bool) -> None:
    """Start with a live view of the server log, print how to connect, wait for Ctrl-C or the server's death."""
    import time

    from agentflow.cli._output import print_unredacted
    from agentflow.cli.parts.serve_flag import exit_with_log, start_with_progress
    from agentflow.serving.process import install_signal_handlers

    install_signal_handlers()
    try:
        start_with_progress(handle, quiet=as_json)
        info = {**handle.describe(), "api_key": handle.api_key}
        # the key is what a client of this server needs: printed as it is (everything else is redacted)
        if as_json:
            print_unredacted(__import__("json").dumps(info))
        else:
            typer.echo(f"{handle.launch.label} ready in {info['start_seconds']}s (pid {info['pid']})")
            typer.echo(f"  base URL : {info['base_url']}")
            typer.echo(f"  model    : {info['spec']}")
            print_unredacted(f"  API key  : export AGENTFLOW_API_KEY={handle.api_key}")
            typer.echo(f"  log      : {info['log']}")
            typer.echo("Press Ctrl-C to stop.")
        while handle.alive:
            time.sleep(0.5)
        exit_with_log(handle.died_error())
    except KeyboardInterrupt:
        typer.echo("agentflow: stopping the server", err=True)
    finally:
        handle.stop_sync()
