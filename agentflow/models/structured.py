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


class NoJSONError(ValueError):
    """The text holds no JSON value; the message is meant for the model."""


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
    """Validate `text` (tolerantly extracted JSON) as `schema`; raises pydantic's ValidationError or ValueError."""
    return schema.model_validate(extract_json(text))


def _why(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        errs = exc.errors()
        first = errs[0]
        loc = ".".join(str(x) for x in first["loc"]) or "(top level)"
        more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
        return f"{loc}: {first['msg']}{more}"
    return str(exc)


async def chat_structured(
    model: ChatModel, request: ChatRequest, schema: type[T], *, retries: int = 1
) -> tuple[T, ChatResponse]:
    """Call `model` asking for `schema`; return the validated object and the (last) response.

    The returned response's usage and latency cover every attempt.
    """
    request = request.model_copy(
        update={
            "response_schema": schema.model_json_schema(),
            "response_schema_name": request.response_schema_name or schema.__name__,
            "n": 1,
        }
    )
    usage, latency = Usage(cost_usd=0.0), 0.0
    for attempt in range(retries + 1):
        response = await model.chat(request)
        usage, latency = usage + response.usage, latency + response.latency_s
        try:
            value = parse_structured(response.text, schema)
        except (ValidationError, ValueError) as exc:
            why = _why(exc)
            if attempt == retries:
                raise StructuredOutputError(
                    f"{model.spec}: reply does not match {schema.__name__}: {why}"
                ) from None
            request = request.model_copy(
                update={
                    "messages": [
                        *request.messages,
                        Message.assistant(response.text),
                        Message.user(MODEL_PROMPTS.render("structured_retry.j2", why=why)),
                    ]
                }
            )
            continue
        response.usage, response.latency_s = usage, latency
        return value, response
    raise AssertionError("unreachable")  # pragma: no cover
