"""vLLM integration: runs only where vLLM and an NVIDIA GPU are present (skipped here, reason printed).

Model: $AGENTFLOW_VLLM_TEST_MODEL (default Qwen/Qwen2.5-0.5B-Instruct, downloaded by vLLM on first use).
"""

from __future__ import annotations

import os

import pytest

from agentflow.events import EventLog
from agentflow.models.base import ChatRequest, Message
from agentflow.models.spec import served_model

pytestmark = pytest.mark.vllm

MODEL = os.environ.get("AGENTFLOW_VLLM_TEST_MODEL", "Qwen/Qwen2.5-0.5B-Instruct")


@pytest.fixture(autouse=True)
def _need_vllm() -> None:
    from agentflow.serving.vllm import vllm_available

    reason = vllm_available()
    if reason is not None:
        print(f"\nskipping vLLM test: {reason}")
        pytest.skip(reason)


async def test_vllm_server_chat_samples_metrics_and_shutdown() -> None:
    from agentflow.serving.metric_events import emit_metrics

    from agentflow.serving.vllm import start_vllm

    handle = await start_vllm(model=MODEL, max_model_len=2048, gpu_memory_utilization=0.5,
                              enable_prefix_caching=True)
    try:
        model = served_model(handle, max_attempts=1)
        response = await model.chat(ChatRequest(messages=[Message.user("Name a colour.")], n=3, temperature=1.0,
                                                max_tokens=16))
        await model.aclose()
        assert len(response.choices) == 3 and response.usage.output_tokens > 0
        data = await emit_metrics(handle, EventLog())
        assert data["requests_running"] is not None and data["kv_cache_usage"] is not None
    finally:
        await handle.stop()
    assert not handle.alive


async def test_in_process_engine_batches_n_samples() -> None:
    from agentflow.serving.vllm_engine import VllmEngineModel

    model = VllmEngineModel(MODEL, max_model_len=2048, gpu_memory_utilization=0.4)
    try:
        response = await model.chat(ChatRequest(messages=[Message.user("Name a colour.")], n=4, temperature=1.0,
                                                max_tokens=16))
    finally:
        await model.aclose()
    assert len(response.choices) == 4 and response.usage.output_tokens > 0
