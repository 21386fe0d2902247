"""Every character the CLI prints passes through `secrets.redact`, whoever prints it.

The command's printers (run lines, the `--json` event stream, reports), its one-line errors and warnings, a
library's log line and a traceback all end in `sys.stdout` or `sys.stderr`; `redacted_output` puts a
`RedactedStream` there, so no printer can forget to redact and no value's type can slip past.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from agentflow.secrets import redact

_ENDS = ("\n", "\r")


class RedactedStream:
    """A text stream that writes whole lines to `inner` once they are redacted.

    A line is held until it ends (a secret written in two pieces is masked whole). `flush()` also writes what
    precedes the last space of an unfinished line (a prompt, streamed text), keeping the last word back: it may
    be the start of a secret. `drain()` writes everything."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self._pending = ""
        self._lock = threading.RLock()

    def write(self, text: str) -> int:
        with self._lock:
            self._pending += text
            cut = max(self._pending.rfind(end) for end in _ENDS) + 1
            if cut:
                self._emit(cut)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        with self._lock:
            cut = max(self._pending.rfind(" "), self._pending.rfind("\t")) + 1
            if cut:
                self._emit(cut)
            self.inner.flush()

    def drain(self) -> None:
        """Write what is held, finished or not."""
        with self._lock:
            if self._pending:
                self._emit(len(self._pending))
            self.inner.flush()

    def _emit(self, cut: int) -> None:
        head, self._pending = self._pending[:cut], self._pending[cut:]
        self.inner.write(redact(head))

    @property
    def buffer(self) -> Any:
        # bytes written under the text layer would not be redacted: there is no binary side
        raise AttributeError("buffer")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # isatty, fileno, encoding, ... of the real stream


def redact_std_streams() -> list[RedactedStream]:
    """Put a `RedactedStream` on `sys.stdout` and `sys.stderr` (unless one is there); returns those it put."""
    put = []
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactedStream):
            wrapped = RedactedStream(stream)
            setattr(sys, name, wrapped)
            put.append(wrapped)
    return put


@contextlib.contextmanager
def redacted_output() -> Iterator[None]:
    """`redact_std_streams` for the duration of a command; the streams it replaced come back after."""
    put = redact_std_streams()
    try:
        yield
    finally:
        for wrapped in put:
            wrapped.drain()
            for name in ("stdout", "stderr"):
                if getattr(sys, name) is wrapped:
                    setattr(sys, name, wrapped.inner)
