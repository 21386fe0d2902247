"""The event log: where every event of a run is written (redacted), and how an events file is read back."""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Self

from pydantic import TypeAdapter, ValidationError

from agentflow.events.base import Event
from agentflow.events.kinds import AnyEvent
from agentflow.runfiles import open_append, open_read
from agentflow.secrets import redact

_EVENTS: TypeAdapter[AnyEvent] = TypeAdapter(AnyEvent)


def parse_event(value: object) -> AnyEvent:
    """The event a JSON line's object (or a flat dict of fields) holds; `ValidationError` when it is none of
    `AnyEvent` (an unknown kind, a field missing or of the wrong type)."""
    return _EVENTS.validate_python(value)


EventSink = Callable[[Event], None]
"""Sees every event right after it is written (e.g. `agentflow.observe.SpanTranslator`); a sink with a `close()`
method is closed with the log."""


class EventLog:
    """Append-only JSONL event file (or an in-memory list when `path` is None). Thread-safe.

    `sinks` see each written event in write order, under the log's lock, so whatever they derive (trace spans)
    follows the file exactly. `capture_content` asks the writers to include message contents (opt-in).
    `keep=False`: the written events are not kept in `events` (a server that runs for days)."""

    def __init__(self, path: str | Path | None = None, run_id: str = "", *, keep: bool = True) -> None:
        self.path = Path(path) if path is not None else None
        self.run_id = run_id
        self.keep = keep
        self.events: list[Event] = []
        self.sinks: list[EventSink] = []
        self.capture_content = False
        self._lock = threading.Lock()
        self._fh = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open_append(self.path)  # never through a link the folder brings; closed in close()

    def write(self, event: Event) -> Event:
        """Record an event, also one built elsewhere (a remote worker's: redacted again with what this
        process knows), and return it as written. Every field of it, whatever the type of a value, passes
        through `redact` here: the file, the in-memory list and the sinks (trace spans) see only this."""
        if not event.run_id:
            event = event.model_copy(update={"run_id": self.run_id})
        event = parse_event(redact(event.model_dump()))
        line = event.model_dump_json()
        with self._lock:
            if self.keep:
                self.events.append(event)
            if self._fh is not None:
                self._fh.write(line + "\n")
                self._fh.flush()
            for sink in self.sinks:
                sink(event)
        return event

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


class UnreadableEvents(UserWarning):
    """Lines of an events file that are no event of this version (an older agentflow's kinds, a tampered file)."""


def read_events(path: str | Path) -> Iterator[AnyEvent]:
    """Read an events file. A torn last line left by a crash is skipped; any other line that is no event of
    `AnyEvent` is skipped with one `UnreadableEvents` warning for the file, naming how many and the first."""
    skipped, first = 0, ""
    with open_read(path) as fh:  # a regular file only, never through a link
        for number, line in enumerate(fh, 1):
            torn = not line.endswith("\n")
            line = line.strip()
            if not line:
                continue
            try:
                yield parse_event(json.loads(line))
            except (ValueError, RecursionError) as exc:  # nested too deeply to parse: tampered
                if torn and not isinstance(exc, ValidationError):
                    continue
                skipped += 1
                first = first or f"line {number}: {_problem(exc)}"
    if skipped:
        warnings.warn(f"{path}: {skipped} line(s) skipped, not events of this agentflow version (first at {first})",
                      UnreadableEvents, stacklevel=2)


def _problem(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        return f"{where}: {error['msg']}" if where else str(error["msg"])
    return type(exc).__name__ if isinstance(exc, RecursionError) else f"not JSON ({exc})"
