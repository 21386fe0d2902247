"""One question to a model (`ask`), and the code blocks of its answer (`code_block`, `code_blocks`).

The one way a node makes a single model call: the request has one shape wherever it is built, so a replayed
cassette matches whoever asks. A multi-turn conversation without tools is a `Conversation`; one with tools is
an agent's (`agentflow.agents`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from agentflow.budget import Budget
from agentflow.errors import ModelError
from agentflow.models.base import ChatModel, ChatRequest, FinishReason, Message, Usage
from agentflow.models.instrumented import InstrumentedModel


@dataclass(frozen=True)
class Answer:
    """The first sample of a model's reply."""

    text: str
    finish: FinishReason
    """Why the sample ended (`length`: cut at `max_tokens`)."""
    usage: Usage
    """Tokens and cost of the call."""


def ask_request(user: str, *, system: str | None = None, shots: Sequence[tuple[str, str]] = (),
                temperature: float | None = 0.0, max_tokens: int | None, seed: int | None = None,
                stop: Sequence[str] = (), raw: bool = False) -> ChatRequest:
    """The request of one question: the `system` message (none when None), the `shots` (worked examples) as
    earlier (question, answer) turns, then `user`. None for `max_tokens` or `temperature`: the backend's.
    `raw`: `user` is the whole prompt, in the model's own format (`ChatRequest.raw`; no system, no shots)."""
    turns = [m for q, a in shots for m in (Message.user(q), Message.assistant(a))]
    messages = ([Message.system(system)] if system is not None else []) + turns + [Message.user(user)]
    return ChatRequest(messages=messages, temperature=temperature, seed=seed, max_tokens=max_tokens, stop=list(stop),
                       raw=raw)


@dataclass
class Conversation:
    """A multi-turn exchange without tools: `reply` asks the model and keeps its answer as the next turn; `tell`
    adds the next user message."""

    messages: list[Message]

    @classmethod
    def start(cls, system: str, user: str) -> Conversation:
        """A conversation of a system message and the first user message."""
        return cls([Message.system(system), Message.user(user)])

    async def reply(self, model: ChatModel, *, temperature: float | None, seed: int | None,
                    max_tokens: int | None) -> str:
        """The model's next answer (its first sample's text), kept in the conversation."""
        request = ChatRequest(messages=list(self.messages), temperature=temperature, seed=seed, max_tokens=max_tokens)
        text = (await model.chat(request)).text
        self.messages.append(Message.assistant(text))
        return text

    def tell(self, text: str) -> None:
        """Add the next user message."""
        self.messages.append(Message.user(text))


def charging(model: ChatModel, budget: Budget | None) -> ChatModel:
    """`model` with its calls held against `budget` (`InstrumentedModel`: admitted before they start, cut at its
    wall-clock limit, charged after), unless there is no budget or the model charges one itself."""
    if budget is None or (isinstance(model, InstrumentedModel) and model.budget is not None):
        return model
    return InstrumentedModel(model, budget=budget)


async def ask(model: ChatModel, user: str, *, system: str | None = None, shots: Sequence[tuple[str, str]] = (),
              temperature: float | None = 0.0, max_tokens: int | None, seed: int | None = None,
              stop: Sequence[str] = (), budget: Budget | None = None, raw: bool = False) -> Answer:
    """The model's answer to one question (`ask_request`), charged to `budget` unless the model charges a
    budget itself (`charging`). A reply without a sample is a `ModelError`."""
    request = ask_request(user, system=system, shots=shots, temperature=temperature, max_tokens=max_tokens,
                          seed=seed, stop=stop, raw=raw)
    response = await charging(model, budget).chat(request)
    if not response.choices:
        raise ModelError(f"{model.spec}: the model returned no answer")
    choice = response.choices[0]
    return Answer(choice.message.content or "", choice.finish_reason, response.usage)


_FENCE = re.compile(r"```[ \t]*([^\n`]*)\n(.*?)(?:```|\Z)", re.DOTALL)
"""A fenced block: its info string (the language first) and its text; an unclosed last block runs to the end."""
_ALIASES = {"python": ("python", "py", "python3")}


def _fenced(text: str) -> list[tuple[str, str]]:
    """(language, code) of each non-empty fenced block, in order: the language lower-cased ("" untagged), the
    code without the blank lines around it (its indentation kept)."""
    blocks = []
    for info, body in _FENCE.findall(text):
        lines = body.split("\n")
        while lines and not lines[0].strip():
            lines.pop(0)
        while lines and not lines[-1].strip():
            lines.pop()
        if lines:
            blocks.append(((info.split() or [""])[0].lower(), "\n".join(lines)))
    return blocks


def code_blocks(text: str) -> list[str]:
    """The code of every non-empty fenced block of an answer, whatever its language, in order (an unclosed
    last block included), without the blank lines around it."""
    return [code for _, code in _fenced(text)]


def code_block(text: str, language: str = "python") -> str | None:
    """The code an answer gives in `language`: the longest block tagged with it (`py` counts as python), else
    the longest untagged block; None without either. The other blocks of an answer (a usage example, the output
    it expects, a shell command) are shorter and seldom tagged with the code's language."""
    blocks = _fenced(text)
    names = _ALIASES.get(language, (language,))
    for wanted in (lambda lang: lang in names, lambda lang: lang == ""):
        found = [code for lang, code in blocks if wanted(lang)]
        if found:
            return max(found, key=len)
    return None


__all__ = ["Answer", "ask", "ask_request", "charging", "code_block", "code_blocks"]
