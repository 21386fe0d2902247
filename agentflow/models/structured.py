"""`chat_structured`: ask for a reply that validates against a pydantic model, and parse it.

The request carries the model's JSON schema (`response_schema`): backends with a JSON-schema mode
(OpenAI-style servers) enforce it, the others (Anthropic) put it into the prompt. The reply is parsed
tolerantly (code fences, prose around the object) and validated; a reply that does not validate is sent
back once with the validation error, then a `StructuredOutputError` names what was wrong.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from agentflow.errors import ModelError
from agentflow.models.base import ChatModel, ChatRequest, ChatResponse, Message, Usage
from agentflow.models.templates import MODEL_PROMPTS

T = TypeVar("T", bound=BaseModel)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


class StructuredOutputError(ModelError):
    """The model's reply did not validate against the requested schema (after the retry)."""


class OutputParseError(ValueError):
    """A reply that is not valid JSON of the wanted schema; the message is meant for the model."""


class NoJSONError(OutputParseError):
    """The text holds no JSON value."""


def extract_json(text: str) -> Any:
    """The first JSON value read from a reply: the whole text, else a fenced block, else the outermost
    `{...}`, else the outermost `[...]`; raises NoJSONError. The one reader of JSON in model replies."""
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    for opening, closing in ("{}", "[]"):
        start, end = text.find(opening), text.rfind(closing)
        if 0 <= start < end:
            candidates.append(text[start : end + 1])
    for candidate in candidates:
        if not candidate:
            continue
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    raise NoJSONError("no JSON object found in the reply")


def parse_structured(text: str, schema: type[T]) -> T:
    """`text` (its JSON read by `extract_json`) validated as `schema`; an OutputParseError says what is wrong."""
    try:
        return schema.model_validate(extract_json(text))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}"
                             for err in exc.errors()[:5])
        raise OutputParseError(f"the JSON does not match {schema.__name__}: {problems}") from None


async def chat_structured(model: ChatModel, request: ChatRequest, schema: type[T], *,
                          retries: int = 1) -> tuple[T, ChatResponse]:
    """Call `model` asking for `schema`; return the validated object and the (last) response, whose usage and
    latency cover every attempt."""
    name = request.response_schema_name or schema.__name__
    request = request.model_copy(update={"response_schema": schema.model_json_schema(),
                                         "response_schema_name": name, "n": 1})
    usage, latency = Usage(cost_usd=0.0), 0.0
    for attempt in range(retries + 1):
        response = await model.chat(request)
        usage, latency = usage + response.usage, latency + response.latency_s
        try:
            value = parse_structured(response.text, schema)
        except OutputParseError as exc:
            if attempt == retries:
                raise StructuredOutputError(f"{model.spec}: {exc}") from None
            retry = Message.user(MODEL_PROMPTS.render("structured_retry.j2", why=str(exc)))
            request = request.model_copy(update={"messages": [*request.messages, Message.assistant(response.text),
                                                              retry]})
            continue
        response.usage, response.latency_s = usage, latency
        return value, response
    raise AssertionError("unreachable")  # pragma: no cover
