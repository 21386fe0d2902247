"""`InstrumentedModel`: the budget and event bookkeeping of every model call, in one wrapper."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from typing import Any

from agentflow.budget import Budget, Hold
from agentflow.events import EventLog
from agentflow.events.kinds import ModelCall, ModelTurn
from agentflow.models.base import ChatModel, ChatRequest, ChatResponse, Message, ModelWrapper, StreamDelta


class InstrumentedModel(ModelWrapper):
    """Wraps `inner`; each call is admitted by `budget` before it starts (`Budget.model_call`: refused with
    `BudgetExceeded` when a limit is reached, counting the calls in flight), cut with `BudgetExceeded` at its
    wall-clock limit, charged after it (tokens, USD, one call) and written as `model.call` to `events`.
    """

    def __init__(self, inner: ChatModel, *, budget: Budget | None = None, events: EventLog | None = None,
                 node_id: str | None = None, parent_id: str | None = None) -> None:
        super().__init__(inner)
        self.budget = budget
        self.events = events
        self.node_id = node_id
        self.parent_id = parent_id

    def with_node(self, node_id: str | None, parent_id: str | None = None) -> InstrumentedModel:
        """The same model, budget and event log, with events attributed to another node."""
        return InstrumentedModel(self.inner, budget=self.budget, events=self.events, node_id=node_id,
                                 parent_id=parent_id)

    def _after(self, request: ChatRequest, response: ChatResponse, hold: Hold | None) -> None:
        usage = response.usage
        if hold is not None and self.budget is not None:
            # a served answer (a cache's, the call journal's, a cassette's) took no model time: not timed
            hold.charge_model(tokens=usage.total_tokens, usd=usage.cost_usd,
                              seconds=None if response.cached else response.latency_s)
            if usage.cost_usd is None and not response.cached:
                limit = self.budget.remaining("usd")
                if limit is not None:
                    from agentflow.models.pricing import warn_unpriced

                    warn_unpriced(self.spec, limit)
        if self.events is not None:
            captured = getattr(self.events, "capture_content", False)  # opt-in: prompts and replies may be sensitive
            self.events.write(ModelCall(
                node_id=self.node_id, parent_id=self.parent_id, spec=self.spec, model=response.model,
                usage=usage.model_dump(), latency_s=round(response.latency_s, 6), n=request.n, cached=response.cached,
                finish_reasons=[c.finish_reason for c in response.choices],
                messages=[_message(m) for m in request.messages] if captured else None,
                output=[_message(c.message) for c in response.choices] if captured else None,
            ))
            if getattr(self.events, "record_turns", True):
                self.events.write(turn_record(self.spec, request, response).model_copy(
                    update={"node_id": self.node_id, "parent_id": self.parent_id}))

    def _admitted(self, request: ChatRequest) -> AbstractContextManager[Hold | None]:
        """The budget's hold on a call (`Budget.model_call`); none without a budget."""
        return self.budget.model_call(_most_tokens(request)) if self.budget is not None else nullcontext()

    def _deadline(self) -> AbstractAsyncContextManager[None]:
        return self.budget.deadline() if self.budget is not None else nullcontext()

    async def chat(self, request: ChatRequest) -> ChatResponse:
        with self._admitted(request) as hold:
            async with self._deadline():
                response = await self.inner.chat(request)
            self._after(request, response, hold)
        return response

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        with self._admitted(request) as hold:
            deltas = aiter(self.inner.stream(request))
            try:
                while True:
                    # the deadline covers the wait for each piece, never the consumer's work between them
                    try:
                        async with self._deadline():
                            delta = await anext(deltas)
                    except StopAsyncIteration:
                        return
                    if delta.response is not None:
                        self._after(request, delta.response, hold)
                    yield delta
            finally:
                close = getattr(deltas, "aclose", None)
                if close is not None:
                    await close()


def _most_tokens(request: ChatRequest) -> int:
    """The output tokens a call may use at most (0 when the request sets no limit: then only its actual
    usage is charged, after it)."""
    return (request.max_tokens or 0) * max(1, request.n)


def turn_record(spec: str, request: ChatRequest, response: ChatResponse) -> ModelTurn:
    """One model call as training data (event `model.turn`): the messages it read, the samples it gave with
    their token traces (scrubbed of any text that held a secret), the sampling settings and the model's
    identity. See docs/concepts/training-data.md."""
    sampling = request.model_dump(include={"temperature", "top_p", "seed", "max_tokens", "n", "stop"})
    samples = []
    for choice in response.choices:
        trace = choice.trace.scrubbed() if choice.trace is not None else None
        samples.append({"message": _message(choice.message), "finish_reason": choice.finish_reason,
                        "trace": trace.model_dump() if trace is not None else None})
    return ModelTurn(spec=spec, model=response.model, identity=dict(response.identity), sampling=sampling,
                     tools=[t.name for t in request.tools], messages=[_message(m) for m in request.messages],
                     samples=samples, cached=response.cached)


def _message(message: Message) -> dict[str, Any]:
    """A message as event data: role, text and tool calls, without empty fields."""
    return message.model_dump(mode="json", exclude_none=True, exclude_defaults=True) | {"role": message.role}
