"""The envelope every event shares, and how an event sits on disk.

An event model is flat in Python (`event.tokens`), nested on disk: the envelope (`ts`, `run_id`, `kind`,
`node_id`, `parent_id`) at the top of the JSON line and the payload under `data`, so the viewer and the files
of earlier runs keep one layout. The attribution tags (`instance_id`, `search`, `branch`) travel in `data` too,
only when set.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

ENVELOPE = ("ts", "run_id", "kind", "node_id", "parent_id")
"""The fields at the top of an event's JSON line; every other field is under `data`."""
TAGS = ("instance_id", "search", "branch")
"""Who wrote an event (set by the log a writer was given: a task's, a search branch's): in `data` when set."""


class Event(BaseModel):
    """One thing that happened in a run: the base of every event model (`agentflow.events.AnyEvent`)."""

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid")

    ts: float = Field(default_factory=time.time)
    """Unix time the event was recorded."""
    run_id: str = ""
    """The run this event belongs to (the log fills it in)."""
    kind: str = ""
    """What happened, dotted (`model.call`): each event model's own, given as a class keyword."""
    node_id: str | None = None
    """Graph node name for workflow events, or search-tree node id for search events."""
    parent_id: str | None = None
    """Parent search-tree node id (search events only)."""
    instance_id: str | None = None
    """The task the event belongs to, in a run of many tasks."""
    search: str | None = None
    """The search node whose branch wrote the event."""
    branch: str | None = None
    """The search branch that wrote the event."""

    renamed: ClassVar[dict[str, str]] = {}
    """Payload keys of the disk format that are fields of another name here (a payload `kind` would shadow the
    event's own)."""

    def __init_subclass__(cls, kind: str = "", **kwargs: Any) -> None:
        """`class ModelCall(Event, kind="model.call")`: the model's `kind` is that `Literal`, defaulted (the
        discriminator of `AnyEvent`)."""
        if kind:
            cls.__annotations__["kind"] = Literal[kind]
            cls.kind = kind
        super().__init_subclass__(**kwargs)

    @model_validator(mode="before")
    @classmethod
    def _from_disk(cls, value: Any) -> Any:
        """A JSON line's `data` spread into the fields (the envelope keeps its own keys)."""
        if isinstance(value, dict) and isinstance(value.get("data"), dict):
            flat = {k: v for k, v in value.items() if k != "data"}
            for key, item in value["data"].items():
                key = cls.renamed.get(key, key)
                if key not in ENVELOPE:
                    flat[key] = item
            return flat
        return value

    @model_serializer(mode="wrap")
    def _to_disk(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        flat = handler(self)
        out = {key: flat.pop(key) for key in ENVELOPE if key in flat}
        back = {field: key for key, field in self.renamed.items()}
        # an optional field its writer left out stays out of the line (as a tag that is not set)
        data = {back.get(key, key): value for key, value in flat.items()
                if value is not None or (key in self.model_fields_set and key not in TAGS)}
        return {**out, "data": data}

    @property
    def data(self) -> dict[str, Any]:
        """The payload as the JSON line's `data` holds it (for generic displays: the viewer, span attributes)."""
        return dict(self.model_dump(mode="json")["data"])
