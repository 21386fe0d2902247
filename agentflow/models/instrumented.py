"""`InstrumentedModel`: charge a Budget and write a `model.call` event for every call of any model.

Agents and search wrap their model once instead of repeating the bookkeeping at every call site.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agentflow.budget import Budget
from agentflow.events import EventLog
from agentflow.models.base import ChatModel, ChatRequest, ChatResponse, StreamDelta


class InstrumentedModel:
    """Wraps `inner`; after each call charges `budget` (tokens, USD, one call) and emits `model.call` to `events`.

    With `check_budget=True` a call is refused (`BudgetExceeded`) once any limit is reached.
    """

    def __init__(
        self,
        inner: ChatModel,
        *,
        budget: Budget | None = None,
        events: EventLog | None = None,
        node_id: str | None = None,
        parent_id: str | None = None,
        check_budget: bool = False,
    ) -> None:
        self.inner = inner
        self.spec = inner.spec
        self.budget = budget
        self.events = events
        self.node_id = node_id
        self.parent_id = parent_id
        self.check_budget = check_budget

    def with_node(self, node_id: str | None, parent_id: str | None = None) -> InstrumentedModel:
        """The same model, budget and event log, with events attributed to another node."""
        return InstrumentedModel(
            self.inner,
            budget=self.budget,
            events=self.events,
            node_id=node_id,
            parent_id=parent_id,
            check_budget=self.check_budget,
        )

    def _before(self) -> None:
        if self.check_budget and self.budget is not None:
            self.budget.check()

    def _after(self, request: ChatRequest, response: ChatResponse) -> None:
        usage = response.usage
        if self.budget is not None:
            self.budget.charge_model(tokens=usage.total_tokens, usd=usage.cost_usd, calls=1)
            if usage.cost_usd is None and not response.cached:
                limit = self.budget.remaining("usd")
                if limit is not None:
                    from agentflow.models.pricing import warn_unpriced

                    warn_unpriced(self.spec, limit)
        if self.events is not None:
            data: dict[str, Any] = {
                "spec": self.spec,
                "model": response.model,
                "usage": usage.model_dump(),
                "latency_s": round(response.latency_s, 6),
                "n": request.n,
                "cached": response.cached,
                "finish_reasons": [c.finish_reason for c in response.choices],
            }
            if getattr(self.events, "capture_content", False):  # opt-in: prompts and replies may be sensitive
                data["messages"] = [_message(m) for m in request.messages]
                data["output"] = [_message(c.message) for c in response.choices]
            self.events.emit("model.call", node_id=self.node_id, parent_id=self.parent_id, **data)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self._before()
        response = await self.inner.chat(request)
        self._after(request, response)
        return response

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        self._before()
        async for delta in self.inner.stream(request):
            if delta.response is not None:
                self._after(request, delta.response)
            yield delta

    async def aclose(self) -> None:
        await self.inner.aclose()


def _message(message: Any) -> dict[str, Any]:
    """A message as event data: role, text and tool calls, without empty fields."""
    return message.model_dump(mode="json", exclude_none=True, exclude_defaults=True) | {"role": message.role}
