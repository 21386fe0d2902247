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


class _Lines:
    """Text or bytes held until a line ends, then redacted and written to `inner`.

    A line is held until it ends (a secret written in two pieces is masked whole). `flush()` also writes what
    precedes the last space of an unfinished line (a prompt, streamed text), keeping the last word back: it may
    be the start of a secret. `drain()` writes everything."""

    def __init__(self, inner: Any, empty: Any, ends: tuple[Any, ...], spaces: tuple[Any, ...]) -> None:
        self.inner = inner
        self._pending, self._ends, self._spaces = empty, ends, spaces
        self._lock = threading.RLock()

    def write(self, data: Any) -> int:
        with self._lock:
            self._pending += data
            cut = max(self._pending.rfind(end) for end in self._ends) + 1
            if cut:
                self._emit(cut)
        return len(data)

    def writelines(self, lines: Iterable[Any]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        with self._lock:
            cut = max(self._pending.rfind(space) for space in self._spaces) + 1
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

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # isatty, fileno, encoding, ... of the real stream


class RedactedStream(_Lines):
    """`sys.stdout` or `sys.stderr`, redacted line by line (see `_Lines`); its `buffer` (bytes written under
    the text layer, as the MCP stdio transport does) is redacted the same way."""

    def __init__(self, inner: TextIO) -> None:
        super().__init__(inner, "", ("\n", "\r"), (" ", "\t"))
        raw = getattr(inner, "buffer", None)
        self._buffer = _Lines(raw, b"", (b"\n", b"\r"), (b" ", b"\t")) if raw is not None else None

    @property
    def buffer(self) -> Any:
        if self._buffer is None:
            raise AttributeError("buffer")
        return self._buffer

    def drain(self) -> None:
        super().drain()
        if self._buffer is not None:
            self._buffer.drain()


def print_unredacted(text: str) -> None:
    """Print a line to stdout as it is: only for a secret the user asked this command for (the API key of the
    model server `agentflow serve` started, which its clients need)."""
    stream = getattr(sys.stdout, "unescaped", sys.stdout)  # under `common.escaping_streams`
    inner = stream.inner if isinstance(stream, RedactedStream) else stream
    stream.flush()
    inner.write(text + "\n")
    inner.flush()


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
