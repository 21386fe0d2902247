"""One instance of every event kind, each of its fields filled from its type (strings with a given text): the
class of inputs for tests of the event log's redaction and of every reader."""

from __future__ import annotations

import enum
import types
import typing
from typing import Any

from pydantic.fields import FieldInfo

from agentflow.events import Event
from agentflow.events.base import ENVELOPE
from agentflow.events.kinds import AnyEvent

MEMBERS: tuple[type[Event], ...] = typing.get_args(typing.get_args(AnyEvent)[0])
"""Every model of the union, in its order."""


def _value(annotation: Any, text: str) -> Any:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return args[0]
    if origin in (typing.Union, types.UnionType):
        return _value(next(a for a in args if a is not type(None)), text)
    if origin is list:
        return [_value(args[0], text)]
    if origin is dict:
        return {f"key {text}": _value(args[1], text)}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return next(iter(annotation))
    if annotation is bool:
        return True
    if annotation is int:
        return 3
    if annotation is float:
        return 0.5
    return text  # str, and Any: a string is what a secret would be


def sample(model: type[Event], text: str = "sample") -> Event:
    """`model` with every payload field and the tags set: strings hold `text`."""
    fields: dict[str, FieldInfo] = model.model_fields
    values = {name: _value(info.annotation, text) for name, info in fields.items()
              if name not in ENVELOPE or name in ("node_id", "parent_id")}
    return model(**values)


def samples(text: str = "sample") -> list[Event]:
    return [sample(model, text) for model in MEMBERS]
