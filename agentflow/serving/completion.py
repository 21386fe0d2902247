"""Text-completion mode for base models: render the chat as a few-shot text prompt for `/v1/completions`.

Base models (like `gemma3-270m`) have no instruction template; they continue text. A `FewShotTemplate`
turns messages into `preamble, examples, turns, "Answer:"`-style text and stops at the next question.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from agentflow.config import StrictConfig
from agentflow.errors import UserError
from agentflow.models.backends.openai_backend import OpenAIChatModel
from agentflow.models.base import ChatRequest, ChatResponse, Message


class FewShotTemplate(StrictConfig):
    """How a conversation becomes a completion prompt."""

    preamble: str = "Below are questions, each followed by a short, correct answer."
    """Text before everything else (a system message replaces it)."""
    user_prefix: str = "Question: "
    """Written before each user (and tool) message."""
    assistant_prefix: str = "Answer:"
    """Written before each assistant message, and at the end for the model to continue."""
    separator: str = "\n\n"
    """Between blocks."""
    examples: list[tuple[str, str]] = Field(default_factory=list)
    """Few-shot (question, answer) pairs placed before the conversation."""
    stop: list[str] = Field(default_factory=lambda: ["\nQuestion:", "\n\n\n"])
    """Stop sequences that end the answer (added to the request's own)."""

    def render(self, messages: list[Message]) -> str:
        system = "\n".join(m.content or "" for m in messages if m.role == "system").strip()
        blocks = [system or self.preamble] if (system or self.preamble) else []
        for question, answer in self.examples:
            blocks += [f"{self.user_prefix}{question}", f"{self.assistant_prefix} {answer}"]
        for m in messages:
            if m.role == "system":
                continue
            prefix = self.assistant_prefix + " " if m.role == "assistant" else self.user_prefix
            blocks.append(f"{prefix}{m.content or ''}")
        blocks.append(self.assistant_prefix)
        return self.separator.join(blocks)


class CompletionChatModel(OpenAIChatModel):
    """A ChatModel over an OpenAI-compatible `/v1/completions` endpoint, through a `FewShotTemplate` (a raw
    request's prompt is sent as it is)."""

    def __init__(self, *args: Any, template: FewShotTemplate | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.template = template or FewShotTemplate()

    async def _chat_once(self, request: ChatRequest) -> ChatResponse:
        if request.raw:
            return await super()._chat_once(request)
        if request.tools:
            raise UserError(f"{self.spec}: completion-mode models cannot call tools",
                            hint="use an agent edit format without tool calls (e.g. 'json' or 'whole')")
        return await self._text_completion(request, self.template.render(request.messages),
                                           [*self.template.stop, *request.stop], strip=True)

    def _stream_once(self, request: ChatRequest) -> Any:  # the whole answer arrives as one piece
        return self._stream_fallback(request)
