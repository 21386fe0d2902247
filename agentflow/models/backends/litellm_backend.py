"""`litellm:PROVIDER/MODEL` through LiteLLM (optional extra `agentflow[litellm]`, imported only here).

LiteLLM speaks the OpenAI format and raises OpenAI-style errors, so the OpenAI conversion and the shared
error classification apply unchanged.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

from agentflow.errors import DependencyMissing
from agentflow.models.backends.openai_backend import _StreamAccumulator, from_openai_response, request_kwargs
from agentflow.models.backends.remote import RemoteModel
from agentflow.models.base import ChatRequest, ChatResponse, StreamDelta
from agentflow.models.options import ModelOptions


class LiteLLMChatModel(RemoteModel):
    def __init__(self, spec: str, model: str, options: ModelOptions) -> None:
        super().__init__(spec, model, options)
        # nothing phones home: LiteLLM would otherwise fetch its price map from GitHub when imported
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        try:
            import litellm
        except ImportError:
            raise DependencyMissing("litellm", "litellm", f"the model spec {spec!r}") from None
        litellm.telemetry = False
        litellm.suppress_debug_info = True  # errors are reported by our one-line messages
        self._litellm = litellm
        self.key_env = f"{model.split('/', 1)[0].upper().replace('-', '_')}_API_KEY"  # LiteLLM's convention

    def _kwargs(self, request: ChatRequest) -> dict[str, Any]:
        kw = request_kwargs(request)
        kw.update(request.extra)
        kw.update(model=self.model, num_retries=0, timeout=self.options.timeout_s)
        if self.options.api_key is not None:
            kw["api_key"] = self.options.api_key
        if self.options.base_url is not None:
            kw["api_base"] = self.options.base_url
        return kw

    async def _chat_once(self, request: ChatRequest) -> ChatResponse:
        return from_openai_response(await self._litellm.acompletion(**self._kwargs(request)))

    async def _stream_once(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        kw = self._kwargs(request)
        kw.update(stream=True, stream_options={"include_usage": True})
        acc = _StreamAccumulator()
        async for chunk in await self._litellm.acompletion(**kw):
            for delta in acc.add(chunk):
                yield delta
        yield StreamDelta(response=acc.response())
