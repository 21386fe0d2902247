"""Reading an agent's final answer as its output schema: the whole reply as JSON, else a fenced
```json block, else the outermost `{...}` in the text."""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from agentflow.agents.schemas import FinalText

OutputT = TypeVar("OutputT", bound=BaseModel)

_FENCED = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)```", re.DOTALL)


class OutputParseError(ValueError):
    """The final answer is not valid JSON of the output schema; the message is meant for the model."""


def extract_json(text: str) -> Any:
    """The first JSON value found in `text` (see module doc); raises OutputParseError."""
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCED.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        if not candidate:
            continue
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    raise OutputParseError("no JSON object found in the reply")


def parse_output(schema: type[OutputT], text: str | None) -> OutputT:
    """Validate the reply `text` as `schema`; raises OutputParseError with a message the model can act on."""
    if schema is FinalText:
        if not (text or "").strip():
            raise OutputParseError("the reply is empty")
        return schema.model_validate({"text": (text or "").strip()})
    data = extract_json(text or "")
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}"
            for err in exc.errors()[:5]
        )
        raise OutputParseError(f"the JSON does not match {schema.__name__}: {problems}") from None
