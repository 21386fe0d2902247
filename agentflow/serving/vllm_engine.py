"""In-process vLLM engine for batch sampling: `VllmEngineModel("Qwen/Qwen2.5-Coder-7B-Instruct")`.

One `vllm.LLM` per object, built on first use; a request with `n > 1` becomes one `SamplingParams(n=...)`
so the samples share the prompt's KV cache and decode in one batch. vLLM is imported only here, only when
the first call is made. The engine is synchronous; calls run in a worker thread, one at a time.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from agentflow.errors import DependencyMissing, UserError
from agentflow.models.backends.openai_backend import sampling_fields
from agentflow.models.base import ChatRequest, ChatResponse, Choice, Message, StreamDelta, Usage
from agentflow.serving.completion import FewShotTemplate


def sampling_kwargs(request: ChatRequest) -> dict[str, Any]:
    """`vllm.SamplingParams` keyword arguments for `request` (tested without vLLM)."""
    kw: dict[str, Any] = {**sampling_fields(request), "n": request.n}
    if request.stop:
        kw["stop"] = list(request.stop)
    return kw


class VllmEngineModel:
    """A ChatModel running vLLM inside this process (chat mode, or completion mode with a template)."""

    def __init__(self, model: str, *, mode: str = "chat", template: FewShotTemplate | None = None,
                 **engine_kwargs: Any) -> None:
        self.spec = f"vllm-engine:{model}"
        self.model = model
        self.mode = mode
        self.template = template or FewShotTemplate()
        self.engine_kwargs = engine_kwargs
        self._llm: Any = None
        self._lock = threading.Lock()

    def _engine(self) -> Any:
        if self._llm is None:
            try:
                import vllm
            except ImportError:
                raise DependencyMissing("vllm", "vllm", "the in-process vLLM engine") from None
            self._llm = vllm.LLM(model=self.model, **self.engine_kwargs)
        return self._llm

    def _generate(self, request: ChatRequest) -> ChatResponse:
        if request.tools:
            raise UserError(f"{self.spec}: the in-process engine does not call tools",
                            hint="serve the model with 'agentflow serve vllm' for tool calls")
        from vllm import SamplingParams

        params = SamplingParams(**sampling_kwargs(request))
        with self._lock:
            llm = self._engine()
            if self.mode == "completion":
                params.stop = [*self.template.stop, *request.stop]
                outputs = llm.generate([self.template.render(request.messages)], params, use_tqdm=False)
            else:
                messages = [{"role": m.role, "content": m.content or ""} for m in request.messages]
                outputs = llm.chat(messages, params, use_tqdm=False)
        result = outputs[0]
        choices = [Choice(message=Message.assistant(o.text),
                          finish_reason="length" if o.finish_reason == "length" else "stop")
                   for o in result.outputs]
        usage = Usage(input_tokens=len(result.prompt_token_ids or []),
                      output_tokens=sum(len(o.token_ids) for o in result.outputs), cost_usd=0.0)
        return ChatResponse(choices=choices, usage=usage, model=self.model)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        start = time.monotonic()
        response = await asyncio.to_thread(self._generate, request)
        response.latency_s = time.monotonic() - start
        return response

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        response = await self.chat(request)
        for i, choice in enumerate(response.choices):
            yield StreamDelta(index=i, text=choice.message.content or "")
        yield StreamDelta(response=response)

    async def aclose(self) -> None:
        self._llm = None
