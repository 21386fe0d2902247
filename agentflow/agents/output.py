"""Reading an agent's final answer as its output schema (`agentflow.models.structured.parse_structured`)."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel

from agentflow.agents.schemas import FinalText
from agentflow.models.structured import OutputParseError, parse_structured

OutputT = TypeVar("OutputT", bound=BaseModel)


def parse_output(schema: type[OutputT], text: str | None) -> OutputT:
    """Validate the reply `text` as `schema`; raises OutputParseError with a message the model can act on."""
    if schema is FinalText:
        if not (text or "").strip():
            raise OutputParseError("the reply is empty")
        return schema.model_validate({"text": (text or "").strip()})
    return parse_structured(text or "", schema)


__all__ = ["OutputParseError", "parse_output"]
