"""`--serve KIND:MODEL[,k=v...]` for `run`, `repair` and `bench`: a server that lives as long as the command.

`check_serve` refuses a bad value before anything starts; `serving` starts the server with a live view of its
log (its tail and exit 1 when it fails) and stops it however the command ends (error, Ctrl-C, SIGTERM);
`served_loader` and `task_metrics` plug it into repair runs.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from agentflow.cli.common import terminal
from agentflow.errors import printable

if TYPE_CHECKING:
    from agentflow.models.base import ChatModel
    from agentflow.serving.server import ServerHandle

SERVE_HELP = (
    "Start a local model server for this command and use its model wherever no model is set: "
    "llamacpp:MODEL (gemma3-270m, qwen2.5-coder-1.5b or a .gguf path) or vllm:MODEL, "
    "plus ,key=value options (e.g. llamacpp:qwen2.5-coder-1.5b,parallel=8). Stopped when the command ends."
)
SERVE_OPTION = typer.Option(None, "--serve", help=SERVE_HELP, show_default=False)


def _say(message: str) -> None:
    typer.echo(f"agentflow: {message}", err=True)


def exit_with_log(exc: Any) -> NoReturn:
    """A server's error and the last lines of its log (it failed to start, or died), then exit 1."""
    _say(f"error: {exc.summary}")
    for line in exc.log_tail:
        typer.echo(f"  | {line}", err=True)
    raise typer.Exit(1)


def check_serve(value: str | None) -> None:
    """Raise a one-line UserError for a bad `--serve` value; starts nothing."""
    if value is not None:
        from agentflow.serving.flag import serve_options

        serve_options(value)


def start_with_progress(handle: ServerHandle, *, quiet: bool = False) -> None:
    """Start `handle`, showing its log as it starts (a spinner on a terminal); a failed start prints the
    server's last log lines and exits 1."""
    from agentflow.serving.server import ServerError

    label = handle.launch.label
    try:
        if sys.stderr.isatty() and not quiet:
            from rich.console import Console

            shown = printable(label)
            with Console(file=terminal(err=True), stderr=True, markup=False).status(f"starting {shown}") as status:
                handle.start_sync(on_log=lambda line: status.update(f"starting {shown}: {printable(line[-100:])}"))
        else:
            if not quiet:
                _say(f"starting {label} (log: {handle.log_path})")
            handle.start_sync()
    except ServerError as exc:
        exit_with_log(exc)


@contextlib.contextmanager
def serving(value: str | None) -> Iterator[ServerHandle | None]:
    """`with serving(serve) as handle:` — None for no `--serve`, else a started server, stopped on exit."""
    if value is None:
        yield None
        return
    from agentflow.serving.flag import server_from_flag
    from agentflow.serving.process import install_signal_handlers

    install_signal_handlers()  # SIGTERM/SIGHUP unwind through the `finally` below
    handle = server_from_flag(value, say=_say)
    try:
        start_with_progress(handle)
        _say(
            f"{handle.launch.label} ready in {handle.start_seconds or 0:.1f}s (pid {handle.pid}); "
            f"model {handle.spec}"
        )
        yield handle
    finally:
        if handle.process is not None:
            if handle.alive:
                _say(f"stopping {handle.launch.label}")
            handle.stop_sync()


def served_loader(handle: ServerHandle, options: dict[str, Any] | None = None) -> Callable[[str], ChatModel]:
    """A `model_loader` for repair runs: the served model for `handle.spec` (with the server's API key),
    `load_model` for any other spec; `options` (the run's `model_options`) apply to both, however the model
    was chosen. A CPU llama-server decoding several requests at once is slow per request: unless the run says
    otherwise its requests wait as long as `local:` models do (`LOCAL_TIMEOUT_S`)."""
    from agentflow.models.backends.local import LOCAL_TIMEOUT_S
    from agentflow.models.spec import load_model, served_model

    opts = dict(options or {})

    def load(spec: str) -> ChatModel:
        if spec == handle.spec:
            served = dict(opts)
            if handle.kind == "llamacpp":
                served.setdefault("timeout_s", LOCAL_TIMEOUT_S)
            return served_model(handle, **served)
        return load_model(spec, **opts)

    return load


def sets_model(overrides: list[str], key: str = "model") -> bool:
    """True when the `-c` items (files or key=value) set `key` at the top level."""
    from agentflow.config import apply_overrides

    return key in apply_overrides({}, overrides)


@contextlib.contextmanager
def task_metrics(
    handle: ServerHandle | None, out_dir: Path, on_progress: Callable[[Any, Any], None] | None = None
) -> Iterator[Callable[[Any, Any], None] | None]:
    """A `run_batch` progress callback that also writes a `server.metrics` event into the run's `events.jsonl`
    after each finished task (with a `--serve` server): appended by an EventLog of its own (one flushed line per
    event: the two logs never interleave inside a line), opened once the run has started."""
    if handle is None:
        yield on_progress
        return
    from agentflow.events import EventLog
    from agentflow.serving.metric_events import emit_metrics_sync

    opened: list[EventLog] = []

    def progress(p: Any, outcome: Any) -> None:
        if outcome is not None and handle.alive:
            if not opened:
                opened.append(EventLog(out_dir / "events.jsonl", run_id=out_dir.name))
            emit_metrics_sync(handle, opened[0], node_id=outcome.instance_id)
        if on_progress is not None:
            on_progress(p, outcome)

    try:
        yield progress
    finally:
        for events in opened:
            events.close()
