"""vLLM's OpenAI-compatible server (`vllm serve MODEL ...`): options, command line, environment, start.

Flags (vLLM engine/server arguments): `--host`, `--port`, `--served-model-name`, `--gpu-memory-utilization`,
`--max-model-len`, `--tensor-parallel-size`, `--enable-prefix-caching` / `--no-enable-prefix-caching`,
`--dtype`, `--enable-auto-tool-choice` + `--tool-call-parser`. The API key is passed as `VLLM_API_KEY`
(read by the server when `--api-key` is absent) so it stays off the command line; usage statistics are
turned off (`VLLM_NO_USAGE_STATS=1`, `DO_NOT_TRACK=1`): nothing phones home.
"""

from __future__ import annotations

import importlib.util
import shutil
import signal
import sys

from pydantic import Field

from agentflow.config import StrictConfig
from agentflow.errors import DependencyMissing
from agentflow.serving.profiles import default_profile
from agentflow.serving.server import HOST, Launch, LogCallback, ServerHandle


class VllmServerOptions(StrictConfig):
    """How to run `vllm serve`."""

    model: str
    """Hugging Face model id or local path."""
    served_model_name: str | None = None
    """Name clients use in requests; default: `model`."""
    port: int | str = "auto"
    """TCP port on 127.0.0.1, or `auto`."""
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    """Fraction of GPU memory vLLM may use (`--gpu-memory-utilization`)."""
    max_model_len: int | None = Field(default=None, ge=16)
    """Context length (`--max-model-len`)."""
    tensor_parallel_size: int | None = Field(default=None, ge=1)
    """GPUs to shard the model over (`--tensor-parallel-size`)."""
    enable_prefix_caching: bool | None = None
    """True/False to force automatic prefix caching on/off; None keeps vLLM's default."""
    dtype: str | None = None
    """Weights/activations dtype (`--dtype`: auto, half, bfloat16, float16, float32)."""
    tool_call_parser: str | None = None
    """Enables tool calling with this parser (`--enable-auto-tool-choice --tool-call-parser NAME`)."""
    startup_timeout_s: float = Field(default=900.0, gt=0)
    """Seconds to wait for `/health` (weights download and CUDA graph capture take a while)."""
    executable: str | None = None
    """The `vllm` command; default: `vllm` on PATH, else `python -m vllm.entrypoints.cli.main`."""
    extra_args: list[str] = Field(default_factory=list)
    """More `vllm serve` flags, passed through as given (after `--` on the CLI)."""


def _vllm_command(executable: str | None) -> list[str]:
    if executable:
        return [executable]
    found = shutil.which("vllm")
    return [found] if found else [sys.executable, "-m", "vllm.entrypoints.cli.main"]


def vllm_argv(options: VllmServerOptions, *, port: int) -> list[str]:
    """The `vllm serve` command line for `options` on `port` (no API key: see `vllm_env`)."""
    argv = [*_vllm_command(options.executable), "serve", options.model, "--host", HOST, "--port", str(port),
            "--served-model-name", options.served_model_name or options.model]
    if options.gpu_memory_utilization is not None:
        argv += ["--gpu-memory-utilization", f"{options.gpu_memory_utilization:g}"]
    if options.max_model_len is not None:
        argv += ["--max-model-len", str(options.max_model_len)]
    if options.tensor_parallel_size is not None:
        argv += ["--tensor-parallel-size", str(options.tensor_parallel_size)]
    if options.enable_prefix_caching is True:
        argv.append("--enable-prefix-caching")
    elif options.enable_prefix_caching is False:
        argv.append("--no-enable-prefix-caching")
    if options.dtype is not None:
        argv += ["--dtype", options.dtype]
    if options.tool_call_parser is not None:
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", options.tool_call_parser]
    return argv + list(options.extra_args)


def vllm_env(api_key: str | None = None) -> dict[str, str]:
    """Environment additions for the vLLM child: no usage reporting, and its API key when given."""
    env = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "VLLM_CONFIGURE_LOGGING": "1"}
    if api_key is not None:
        env["VLLM_API_KEY"] = api_key
    return env


def vllm_launch(options: VllmServerOptions) -> Launch:
    name = options.served_model_name or options.model
    return Launch(
        kind="vllm", model=name, argv=lambda port: vllm_argv(options, port=port), env=vllm_env(),
        api_key_env="VLLM_API_KEY", startup_timeout_s=options.startup_timeout_s, label=f"vllm[{name}]",
        death_signal=signal.SIGTERM,  # vLLM's own shutdown stops its engine workers
        profile=default_profile(tool_calling=options.tool_call_parser is not None),
    )


def vllm_available() -> str | None:
    """None when vLLM can run here, else the reason it cannot (no package, no CUDA GPU)."""
    if importlib.util.find_spec("vllm") is None:
        return "the vllm package is not installed (pip install 'agentflow[vllm]')"
    if shutil.which("nvidia-smi") is None:
        return "no NVIDIA GPU found (nvidia-smi is missing)"
    return None


def vllm_handle(options: VllmServerOptions) -> ServerHandle:
    """A handle, not yet started, for `options`; a one-line error when vLLM is not installed."""
    if options.executable is None and shutil.which("vllm") is None and importlib.util.find_spec("vllm") is None:
        raise DependencyMissing("vllm", "vllm", "serving with vLLM")
    return ServerHandle(vllm_launch(options), port=options.port)


async def start_vllm(options: VllmServerOptions | None = None, *, on_log: LogCallback | None = None,
                     **fields: object) -> ServerHandle:
    """Start `vllm serve` and wait until healthy: `await start_vllm(model="Qwen/Qwen2.5-Coder-7B-Instruct")`."""
    return await vllm_handle(options or VllmServerOptions.model_validate(fields)).start(on_log)
