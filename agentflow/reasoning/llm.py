"""One model call as part of a node's work: the run's model, charged to the run's budget, recorded as an event.

Node types of small task kinds (code generation, instruction following) talk to the model directly with short
prompts rather than through a tool-using agent loop: a 1.5B local model follows one plain instruction far
more reliably than a tool protocol.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from agentflow.errors import ModelError, UserError


def node_model(ctx: Any) -> Any:
    """The run's shared chat model (`ctx.run.chat_model`), built from `ctx.run.model` on first use."""
    run = ctx.run
    if run.chat_model is None:
        if not run.model:
            raise UserError(
                f"node '{ctx.node}' needs a model",
                hint="pass --model SPEC (e.g. local:qwen2.5-coder-1.5b) or set model: in the workflow",
            )
        run.chat_model = run.model_for(run.model) if hasattr(run, "model_for") else _load(run.model)
    return run.chat_model


def _load(spec: str) -> Any:
    from agentflow.models.spec import load_model

    return load_model(spec)


async def ask(
    ctx: Any,
    prompt: str,
    *,
    system: str | None = None,
    temperature: float = 0.0,
    max_tokens: int = 512,
    seed: int | None = None,
    purpose: str = "",
    shots: Sequence[tuple[str, str]] = (),
) -> str:
    """The model's answer to `prompt` (one sample). The call is admitted by the run's budget before it starts
    (`Budget.model_call`), cut at its wall-clock limit, charged to it and recorded as a `model.ask` event
    carrying `purpose`, so a run's log shows what each call was for (with the prompt and answer when the run
    captures content). `shots`: worked examples as earlier (question,
    answer) turns of the conversation -- a small model copies an example written into the prompt itself (the
    constraint agent listed an example's `End with 'Goodbye.'` as the task's own)."""
    from agentflow.models.base import ChatRequest, Message

    turns = [m for q, a in shots for m in (Message.user(q), Message.assistant(a))]
    messages = ([Message.system(system)] if system else []) + turns + [Message.user(prompt)]
    request = ChatRequest(messages=messages, temperature=temperature, max_tokens=max_tokens, seed=seed)
    budget = ctx.run.budget
    if budget is None:
        response = await node_model(ctx).chat(request)
    else:  # admitted before it starts, cut at the wall-clock limit, charged after
        with budget.model_call(max_tokens) as hold:
            async with budget.deadline():
                response = await node_model(ctx).chat(request)
            hold.charge_model(tokens=response.usage.total_tokens, usd=response.usage.cost_usd)
    if not response.choices:
        raise ModelError(f"node '{ctx.node}': the model returned no answer ({purpose or 'ask'})")
    text = response.text
    # prompts and answers may be sensitive: in the run's events only when content capture is on
    # (`-c trace.content=true`), as for every other model call
    content = {"prompt": prompt[-2000:], "answer": text[-2000:]} if getattr(ctx.run.events, "capture_content", False) else {}
    ctx.emit("model.ask", purpose=purpose, tokens=response.usage.total_tokens, **content)
    return text


def sampling(ctx: Any, temperature: float, sample_temperature: float | None) -> tuple[float, int | None]:
    """The (temperature, seed) of a node's model call. On the main line, and in a search branch that is its
    parent's first child: `temperature`. In a later sibling (`ctx.run.sample` > 0): `sample_temperature`,
    seeded by the sibling's place -- siblings ask the same question from the same state, so without this every
    branch of a search would get the same answer (None: `temperature` everywhere)."""
    sample = getattr(ctx.run, "sample", None)
    if sample is None:
        return temperature, None
    if sample == 0 or sample_temperature is None:
        return temperature, sample
    return sample_temperature, sample


_FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def code_block(text: str, language: str = "python") -> str | None:
    """The longest fenced block of `language` (or an untagged one) in `text`; None without one."""
    blocks = [body for lang, body in _FENCE.findall(text) if lang.lower() in (language, "py" if language == "python" else language, "")]
    return max(blocks, key=len).strip("\n") if blocks else None


def json_block(text: str) -> Any:
    """The first JSON value in `text` (fenced or bare); None when there is none that parses."""
    candidates = [body for _, body in _FENCE.findall(text)] + [text]
    decoder = json.JSONDecoder()
    for chunk in candidates:
        for start, char in enumerate(chunk):
            if char in "[{":
                try:
                    return decoder.raw_decode(chunk[start:])[0]
                except ValueError:
                    continue
    return None


def numbered_items(text: str) -> list[str]:
    """The items of a numbered or bulleted list in `text` (`1. x`, `2) y`, `- z`), in order."""
    items = []
    for line in text.splitlines():
        match = re.match(r"^\s*(?:\d+[.)]|[-*•])\s+(.*\S)", line)
        if match:
            items.append(match.group(1).strip())
    return items


__all__ = ["ask", "code_block", "json_block", "node_model", "numbered_items", "sampling"]
