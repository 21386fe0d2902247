"""`ChatPolicy`: a plain chat-model policy (no tools): each step is one assistant reply, k samples per
proposal in one call (`n=k`), the rollout finishes when a reply contains the final marker.

Wrap the model in an `InstrumentedModel` to get `model.call` events attributed to the search node that made
the call; the policy then leaves budget charging to it."""

from __future__ import annotations

from agentflow.models.base import ChatModel, ChatRequest, Message
from agentflow.search.protocols import RolloutContext, StepPolicy
from agentflow.search.types import Action, NodeState


class ChatPolicy(StepPolicy):
    def __init__(
        self,
        model: ChatModel,
        *,
        task: str,
        system: str = "Solve the task step by step. Put 'FINAL:' before your final answer.",
        final_marker: str = "FINAL:",
        max_steps: int = 8,
        temperature: float | None = 0.8,
        max_tokens: int | None = None,
    ) -> None:
        self.model = model
        self.task = task
        self.system = system
        self.final_marker = final_marker
        self.max_steps = max_steps
        self.temperature = temperature
        self.max_tokens = max_tokens

    def messages(self, state: NodeState) -> list[Message]:
        return state.messages or [Message.system(self.system), Message.user(self.task)]

    async def propose(self, state: NodeState, k: int, ctx: RolloutContext) -> list[Action]:
        request = ChatRequest(messages=self.messages(state), n=k, temperature=self.temperature,
                              seed=ctx.rng.randrange(2**31), max_tokens=self.max_tokens)
        with_node = getattr(self.model, "with_node", None)
        if with_node is not None:  # an InstrumentedModel: it charges the budget and writes model.call itself
            response = await with_node(ctx.node_id, ctx.parent_id).chat(request)
            ctx.usage.add_model(response.usage)
        else:
            response = await self.model.chat(request)
            ctx.charge_model(response.usage)
        return [Action(text=(c.message.content or "")[:200], message=c.message) for c in response.choices]

    async def apply(self, state: NodeState, action: Action, ctx: RolloutContext) -> NodeState:
        message = action.message or Message.assistant(action.text)
        text = message.content or ""
        messages = [*self.messages(state), message]
        final = self.final_marker in text
        done = final or state.depth + 1 >= self.max_steps
        output = text.split(self.final_marker, 1)[1].strip() if final else (text if done else None)
        if not done:
            messages.append(Message.user("Continue."))
        return state.child(messages=messages, done=done, output=output)
