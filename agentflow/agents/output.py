"""Reading an agent's final answer as its output schema, through the one JSON reader
(`agentflow.models.structured.extract_json`)."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from agentflow.agents.schemas import FinalText
from agentflow.models.structured import NoJSONError, extract_json

OutputT = TypeVar("OutputT", bound=BaseModel)


class OutputParseError(ValueError):
    """The final answer is not valid JSON of the output schema; the message is meant for the model."""


def parse_output(schema: type[OutputT], text: str | None) -> OutputT:
    """Validate the reply `text` as `schema`; raises OutputParseError with a message the model can act on."""
    if schema is FinalText:
        if not (text or "").strip():
            raise OutputParseError("the reply is empty")
        return schema.model_validate({"text": (text or "").strip()})
    try:
        data = extract_json(text or "")
    except NoJSONError as exc:
        raise OutputParseError(str(exc)) from None
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}"
            for err in exc.errors()[:5]
        )
        raise OutputParseError(f"the JSON does not match {schema.__name__}: {problems}") from None
