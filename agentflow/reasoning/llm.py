"""One model call as part of a node's work: the run's model, charged to the run's budget, recorded as an event.

Small task kinds talk to the model with short prompts rather than through a tool-using agent loop: a small
local model follows one plain instruction far more reliably than a tool protocol. The helpers read only the
run's handles (`ctx.run`) and the node's name, so they take a `NodeContext` of any deps.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import Field

from agentflow.config import StrictConfig
from agentflow.errors import UserError
from agentflow.events.kinds import ModelAsk
from agentflow.graph.run.context import NodeContext
from agentflow.models.ask import ask
from agentflow.models.base import ChatModel
from agentflow.models.templates import package_templates
from agentflow.tools.context import DepsT

PROMPTS = package_templates(__file__)
"""The prompts of the reasoning steps (`prompts/*.j2`)."""


def node_model(ctx: NodeContext[DepsT]) -> ChatModel:
    """The run's shared chat model (`ctx.run.chat_model`), built from `ctx.run.model` on first use."""
    run = ctx.run
    if run.chat_model is None:
        if not run.model:
            raise UserError(f"node '{ctx.node}' needs a model",
                            hint="pass --model SPEC (e.g. local:qwen2.5-coder-1.5b) or set model: in the workflow")
        run.chat_model = run.model_for(run.model)
    return run.chat_model


async def node_ask(ctx: NodeContext[DepsT], prompt: str, *, system: str | None = None, temperature: float = 0.0,
                   max_tokens: int, seed: int | None = None, purpose: str = "",
                   shots: Sequence[tuple[str, str]] = ()) -> str:
    """The text of `agentflow.models.ask.ask` put to the run's model (`node_model`), charged to the run's
    budget and recorded as a `model.ask` event carrying `purpose`, so a run's log shows what each call was for
    (with the prompt and answer when the run captures content)."""
    answer = await ask(node_model(ctx), prompt, system=system, shots=shots, temperature=temperature,
                       max_tokens=max_tokens, seed=seed, budget=ctx.run.budget)
    # prompts and answers may be sensitive: in the run's events only when content capture is on
    # (`-c trace.content=true`), as for every other model call
    captured = ctx.run.events is not None and ctx.run.events.capture_content
    ctx.emit(ModelAsk(purpose=purpose, tokens=answer.usage.total_tokens, prompt=prompt[-2000:] if captured else None,
                      answer=answer.text[-2000:] if captured else None))
    return answer.text


class SamplingSettings(StrictConfig):
    """Settings of a node whose model call a search samples (`sampling`)."""

    temperature: float = Field(default=0.0, ge=0)
    """Sampling temperature (0: greedy)."""
    sample_temperature: float | None = Field(default=None, ge=0)
    """In a search, the temperature of a branch that is not its parent's first child (seeded by its place among
    its siblings, so they differ); None: `temperature` in every branch."""


def sampling(ctx: NodeContext[DepsT], settings: SamplingSettings) -> tuple[float, int | None]:
    """The (temperature, seed) of a node's model call: `temperature` on the main line and in a search branch
    that is its parent's first child; in a later sibling (`ctx.run.sample` > 0) `sample_temperature`, seeded by
    the sibling's place, since siblings ask the same question from the same state."""
    sample = ctx.run.sample
    if not sample or settings.sample_temperature is None:  # the main line (None) or a first child (0)
        return settings.temperature, sample
    return settings.sample_temperature, sample


def numbered_items(text: str) -> list[str]:
    """The items of a numbered or bulleted list in `text` (`1. x`, `2) y`, `- z`), in order."""
    matches = (re.match(r"^\s*(?:\d+[.)]|[-*•])\s+(.*\S)", line) for line in text.splitlines())
    return [match.group(1).strip() for match in matches if match]


__all__ = ["SamplingSettings", "node_ask", "node_model", "numbered_items", "sampling"]
