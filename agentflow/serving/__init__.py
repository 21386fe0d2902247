"""Local model serving: managed llama-server (CPU) and vLLM (GPU) processes behind OpenAI-compatible URLs.

    handle = await start_llamacpp(model="gemma3-270m")   # or start_vllm(model="Qwen/...")
    model = served_model(handle)                         # agentflow.models.served_model: an openai-compatible ChatModel
    ...
    await handle.stop()

Public names resolve lazily: importing this package starts nothing and imports no SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentflow._lazy import lazy_getattr

_LAZY: dict[str, str] = {
    "ServerHandle": "agentflow.serving.server",
    "ServerError": "agentflow.serving.server",
    "ServerStartError": "agentflow.serving.server",
    "ServerDied": "agentflow.serving.server",
    "Launch": "agentflow.serving.server",
    "LlamaServerOptions": "agentflow.serving.llamacpp",
    "start_llamacpp": "agentflow.serving.llamacpp",
    "VllmServerOptions": "agentflow.serving.vllm",
    "start_vllm": "agentflow.serving.vllm",
    "start_from_flag": "agentflow.serving.flag",
    "parse_serve_flag": "agentflow.serving.flag",
    "served": "agentflow.serving.flag",
    "ModelProfile": "agentflow.serving.profiles",
    "FewShotTemplate": "agentflow.serving.completion",
    "CompletionChatModel": "agentflow.serving.completion",
    "VllmEngineModel": "agentflow.serving.vllm_engine",
    "emit_metrics": "agentflow.serving.metric_events",
    "report_metrics": "agentflow.serving.metric_events",
    "ensure_llama_server": "agentflow.serving.setup",
    "ensure_model": "agentflow.serving.setup",
}

if TYPE_CHECKING:  # pragma: no cover
    from agentflow.serving.completion import CompletionChatModel, FewShotTemplate
    from agentflow.serving.flag import parse_serve_flag, served, start_from_flag
    from agentflow.serving.llamacpp import LlamaServerOptions, start_llamacpp
    from agentflow.serving.metric_events import emit_metrics, report_metrics
    from agentflow.serving.profiles import ModelProfile
    from agentflow.serving.server import Launch, ServerDied, ServerError, ServerHandle, ServerStartError
    from agentflow.serving.setup import ensure_llama_server, ensure_model
    from agentflow.serving.vllm import VllmServerOptions, start_vllm
    from agentflow.serving.vllm_engine import VllmEngineModel


__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = [
    "CompletionChatModel", "FewShotTemplate", "Launch", "LlamaServerOptions", "ModelProfile", "ServerDied",
    "ServerError", "ServerHandle", "ServerStartError", "VllmEngineModel", "VllmServerOptions", "emit_metrics",
    "ensure_llama_server", "ensure_model", "parse_serve_flag", "report_metrics", "served", "start_from_flag",
    "start_llamacpp", "start_vllm"
]
