"""One event schema for everything that happens in a run, linear or search tree, written as JSONL.

Reports are computed from events, not kept beside them. A search tree is events whose `node_id` and
`parent_id` are set; a linear run leaves them empty or uses one node per step.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field

from agentflow.runfiles import open_append, open_read
from agentflow.secrets import redact


class Event(BaseModel):
    """One thing that happened in a run."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    ts: float = Field(default_factory=time.time)
    """Unix time the event was recorded."""
    run_id: str = ""
    """The run this event belongs to."""
    kind: str
    """What happened, dotted: `model.call`, `tool.call`, `node.start`, `node.end`, `search.node`, `budget.exceeded`, ..."""
    node_id: str | None = None
    """Graph node name for workflow events, or search-tree node id for search events."""
    parent_id: str | None = None
    """Parent search-tree node id (search events only)."""
    data: dict[str, Any] = Field(default_factory=dict)
    """Event payload; secrets are redacted before writing."""


EventSink = Callable[[Event], None]
"""Sees every event right after it is written (e.g. `agentflow.observe.SpanTranslator`); a sink with a `close()`
method is closed with the log."""


class EventLog:
    """Append-only JSONL event file (or an in-memory list when `path` is None). Thread-safe.

    `sinks` see each written event in write order, under the log's lock, so whatever they derive (trace spans)
    follows the file exactly. `capture_content` asks the writers to include message contents (opt-in)."""

    def __init__(self, path: str | Path | None = None, run_id: str = "") -> None:
        self.path = Path(path) if path is not None else None
        self.run_id = run_id
        self.events: list[Event] = []
        self.sinks: list[EventSink] = []
        self.capture_content = False
        self._lock = threading.Lock()
        self._fh = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open_append(self.path)  # never through a link the folder brings; closed in close()

    def emit(self, kind: str, /, *, node_id: str | None = None, parent_id: str | None = None, **data: Any) -> Event:
        """Record one event and return it."""
        return self.write(Event(run_id=self.run_id, kind=kind, node_id=node_id, parent_id=parent_id, data=data))

    def write(self, event: Event) -> Event:
        """Record an event, also one built elsewhere (a remote worker's: redacted again with what this
        process knows), and return it as written. Every field of it, whatever the type of a value, passes
        through `redact` here: the file, the in-memory list and the sinks (trace spans) see only this."""
        event = Event.model_validate(redact(event.model_dump()))
        line = event.model_dump_json()
        with self._lock:
            self.events.append(event)
            if self._fh is not None:
                self._fh.write(line + "\n")
                self._fh.flush()
            for sink in self.sinks:
                sink(event)
        return event

    def fsync(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.flush()
                os.fsync(self._fh.fileno())

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None
            sinks, self.sinks = self.sinks, []
        for sink in sinks:
            close = getattr(sink, "close", None)
            if close is not None:
                close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_events(path: str | Path) -> Iterator[Event]:
    """Read an events file, skipping a torn last line left by a crash."""
    with open_read(path) as fh:  # a regular file only, never through a link
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                yield Event.model_validate(json.loads(line))
            except (ValueError, RecursionError):  # torn, or nested too deeply to parse (tampered)
                continue
