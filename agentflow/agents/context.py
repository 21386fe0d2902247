"""Keeping an agent's conversation within its model's context window (docs/concepts/agents.md).

Before each model call the prompt is measured, with the model's own tokenizer where it has one
(`count_prompt_tokens`), else by a deliberately high estimate (`chars_per_token`). While the prompt and the
reply's tokens do not fit, the policy's compaction steps run in order; a prompt that still does not fit is not
sent (`stop_reason: context`). Each compaction is an `agent.compacted` event.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import Field

from agentflow.config import StrictConfig
from agentflow.models.base import ChatRequest, Message, wrapped_models

CompactionStep = Literal["drop_tool_outputs", "keep_ends"]
_DEFAULT_POLICY: tuple[CompactionStep, ...] = ("drop_tool_outputs", "keep_ends")

DROPPED = "[tool output dropped to stay within the context window: {chars} characters]"


class ContextConfig(StrictConfig):
    """How an agent stays within its model's context window."""

    window: int | None = Field(default=None, ge=64)
    """Context tokens of the model; None: what the model declares (`context_window`, e.g. a local model's slot
    size), and no compaction when it declares nothing."""
    policy: list[CompactionStep] = Field(default_factory=lambda: list(_DEFAULT_POLICY))
    """Compaction steps tried in order until the prompt fits; empty: never compact (stop instead)."""
    keep_last: int = Field(default=4, ge=1)
    """Newest messages no compaction step touches."""
    reply_tokens: int = Field(default=512, ge=1)
    """Tokens kept free for the reply when the agent sets no `max_tokens`."""
    chars_per_token: float = Field(default=2.0, gt=0)
    """For models that cannot count their tokens: characters per token assumed (low, so the estimate is high)."""


def prompt_counter(model: object, chars_per_token: float) -> Callable[[ChatRequest], Awaitable[int]]:
    """The model's own `count_prompt_tokens` (looked up through the models it wraps), else an estimate."""
    for level in wrapped_models(model):
        count = getattr(level, "count_prompt_tokens", None)
        if callable(count):
            return count  # type: ignore[no-any-return]

    async def estimate(request: ChatRequest) -> int:
        text = sum(len(m.content or "") + len(json.dumps([c.arguments for c in m.tool_calls])) + 8
                   for m in request.messages)
        text += sum(len(t.model_dump_json()) for t in request.tools)
        return int(text / chars_per_token) + 16

    return estimate


def drop_tool_outputs(messages: list[Message], keep_last: int) -> bool:
    """Replace the oldest tool result not yet dropped (outside the newest `keep_last`); whether one was."""
    for message in messages[: max(0, len(messages) - keep_last)]:
        text = message.content or ""
        if (message.role == "tool" and not text.startswith("[tool output dropped")) or (
            message.role == "user" and "```tool_result" in text  # text-protocol results
        ):
            message.content = DROPPED.format(chars=len(text))
            return True
    return False


def keep_ends(messages: list[Message], keep_last: int) -> bool:
    """Drop the oldest turn after the system prompt and the task (outside the newest `keep_last`): an
    assistant message with the tool results that answer it; whether one was dropped."""
    head = 2 if len(messages) >= 2 and messages[0].role == "system" else 1
    if len(messages) - keep_last <= head:
        return False
    end = head + 1
    if messages[head].role == "assistant" and messages[head].tool_calls:
        while end < len(messages) and messages[end].role == "tool":
            end += 1
    if len(messages) - end < keep_last:
        return False
    del messages[head:end]
    return True


STEPS: dict[str, Callable[[list[Message], int], bool]] = {"drop_tool_outputs": drop_tool_outputs,
                                                          "keep_ends": keep_ends}


async def fit(request: ChatRequest, config: ContextConfig, window: int,
              count: Callable[[ChatRequest], Awaitable[int]]) -> tuple[ChatRequest, dict[str, Any] | None, bool]:
    """`request` compacted until its prompt and reply fit `window`: (request, what was done or None, fits)."""
    reply = request.max_tokens or config.reply_tokens
    before = await count(request)
    if before + reply <= window:
        return request, None, True
    messages = [m.model_copy(deep=True) for m in request.messages]
    tokens, changed, used = before, 0, []
    for step in config.policy:
        while tokens + reply > window and STEPS[step](messages, config.keep_last):
            changed += 1
            tokens = await count(request.model_copy(update={"messages": messages}))
            if step not in used:
                used.append(step)
        if tokens + reply <= window:
            break
    compacted = request.model_copy(update={"messages": messages})
    record = {"policy": used, "tokens_before": before, "tokens_after": tokens, "window": window,
              "reply_tokens": reply, "messages_changed": changed}
    return compacted, record, tokens + reply <= window
