"""Text-completion mode for base models: render the chat as a few-shot text prompt for `/v1/completions`.

Base models (like `gemma3-270m`) have no instruction template; they continue text. A `FewShotTemplate`
turns messages into `preamble, examples, turns, "Answer:"`-style text and stops at the next question.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from agentflow.config import StrictConfig
from agentflow.errors import UserError
from agentflow.models.backends.openai_backend import _FINISH, OpenAIChatModel, _usage, token_trace
from agentflow.models.base import ChatRequest, ChatResponse, Choice, Message, TokenTrace


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
    """A ChatModel over an OpenAI-compatible `/v1/completions` endpoint, through a `FewShotTemplate`."""

    schema_field: str = "json_schema"
    """Request field for guided JSON: `json_schema` for llama-server; vLLM accepts `guided_json`."""

    def __init__(self, *args: Any, template: FewShotTemplate | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.template = template or FewShotTemplate()

    def _completion_kwargs(self, request: ChatRequest) -> dict[str, Any]:
        if request.tools:
            raise UserError(f"{self.spec}: completion-mode models cannot call tools",
                            hint="use an agent edit format without tool calls (e.g. 'json' or 'whole')")
        kw: dict[str, Any] = {
            "model": self.model,
            "prompt": self.template.render(request.messages),
            "stop": [*self.template.stop, *request.stop],
        }
        if request.n != 1:
            kw["n"] = request.n
        for name in ("temperature", "top_p", "seed", "max_tokens"):
            value = getattr(request, name)
            if value is not None:
                kw[name] = value
        extra = dict(request.extra)
        if self.trace_tokens:
            extra.setdefault("n_probs", 1)  # llama-server: the sampled tokens with their ids and log-probs
        if request.response_schema is not None:
            extra[self.schema_field] = request.response_schema
        if extra:
            kw["extra_body"] = extra
        return kw

    async def _chat_once(self, request: ChatRequest) -> ChatResponse:
        kw = self._completion_kwargs(request)
        raw = await self.client().completions.create(**kw)
        choices = []
        for c in sorted(raw.choices, key=lambda c: c.index or 0):
            trace = token_trace(c, raw, c.text, "/v1/completions n_probs") if self.trace_tokens else None
            if trace is None and self.trace_tokens and not (c.text or "").strip():
                # llama-server gives no log-probs to a reply that was only a stop string, or only whitespace held
                # back with one: the message keeps the stripped text (none), and so does its trace
                trace = TokenTrace(completion_ids=[], logprobs=[], source="/v1/completions n_probs")
            if trace is not None:
                trace.prompt_text = kw["prompt"]
                trace = trace.scrubbed()
            choices.append(Choice(message=Message(role="assistant", content=(c.text or "").strip()),
                                  finish_reason=_FINISH.get(c.finish_reason or "", "unknown"), trace=trace))
        return ChatResponse(choices=choices, usage=_usage(raw.usage), model=raw.model or self.model)

    def _stream_once(self, request: ChatRequest) -> Any:  # the whole answer arrives as one piece
        return self._stream_fallback(request)
