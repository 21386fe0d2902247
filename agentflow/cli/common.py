"""Helpers shared by CLI modules: console output, `--json`, input parsing, run directories."""

from __future__ import annotations

import contextlib
import json
import secrets
import shlex
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer
from pydantic import BaseModel, ValidationError

from agentflow.errors import UserError, printable

ConfigT = TypeVar("ConfigT", bound=BaseModel)

JSON_OPTION = typer.Option(False, "--json", help="Print machine-readable JSON instead of text.")
CONFIG_OPTION = typer.Option(
    None, "-c", "--config", help="A YAML config file or a KEY=VALUE override; repeatable, applied in order."
)
ALLOW_PATH_OPTION = typer.Option(
    None, "--allow-path", help="A folder the tasks file may name besides its own (repo, wheelhouse); repeatable."
)


class EscapingStream:
    """A text stream that writes every string through `printable(..., lines=True)`: whatever a command prints
    (a node or file name from a workflow, a run folder or a model) reaches the terminal with its control
    characters escaped. Installed over stdout and stderr for the whole command (`escaping_streams`)."""

    def __init__(self, stream: Any) -> None:
        self.unescaped = stream
        """The stream itself, for rich's live displays (their cursor moves are escapes by design; the text
        they show is escaped by their callers)."""

    def write(self, text: str) -> int:
        self.unescaped.write(printable(text, lines=True))
        return len(text)  # all of `text` is consumed, whatever length its escaped form has

    def __getattr__(self, name: str) -> Any:
        # `buffer` too: bytes are not text to escape (the MCP stdio transport speaks JSON-RPC through it)
        return getattr(self.unescaped, name)


@contextlib.contextmanager
def escaping_streams() -> Iterator[None]:
    """sys.stdout and sys.stderr escape control characters while the context lasts."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = EscapingStream(sys.stdout), EscapingStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def terminal(err: bool = False) -> Any:
    """The real stdout (or stderr) under `escaping_streams`, for a rich Console (see `EscapingStream`)."""
    stream = sys.stderr if err else sys.stdout
    return getattr(stream, "unescaped", stream)


def print_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, indent=2, default=str))


def parse_json_input(value: str | None) -> dict[str, Any]:
    """`--input` accepts inline JSON or `@path/to/file.json`."""
    if value is None:
        return {}
    source = "--input"
    text = value
    if value.startswith("@"):
        path = Path(value[1:])
        source = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UserError(f"input file {path} not found", hint="check the path after '@'") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"input file {path} cannot be read: {exc.__class__.__name__}") from None
    from agentflow.config import parse_json

    data = parse_json(text, f"{source}: invalid JSON")
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a JSON object, got {type(data).__name__}")
    return data


def config_with_flags(cls: type[ConfigT], config: list[str] | None, flags: dict[str, tuple[str, Any]]) -> ConfigT:
    """`cls` from the `-c` items with the flags (`field -> (flag, value)`) set over them; a value the model's own
    validation refuses is a one-line error naming the flag."""
    from agentflow.config import load_config

    cfg = load_config(cls, config or [])
    for field, (flag, value) in flags.items():
        try:
            cls.__pydantic_validator__.validate_assignment(cfg, field, value)
        except ValidationError as exc:
            raise UserError(f"{flag}: {exc.errors()[0]['msg']}, got {value!r}") from None
    return cfg


def check_sandbox(value: str | None) -> None:
    """`--sandbox` of the commands that run tasks: docker, local or auto."""
    if value is not None and value not in ("docker", "local", "auto"):
        raise UserError(f"--sandbox must be docker, local or auto, got {value!r}")


def new_run_id(prefix: str = "run") -> str:
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def invoked_argv() -> list[str]:
    """The arguments this CLI call was given (after `agentflow`), as `main.run` received them."""
    import click

    ctx = click.get_current_context(silent=True)
    obj = ctx.find_root().obj if ctx is not None else None
    return list(obj["argv"]) if isinstance(obj, dict) and "argv" in obj else sys.argv[1:]


def with_output(argv: Sequence[str], out_dir: Path) -> list[str]:
    """`argv` with its -o/--output (if any) replaced by `-o OUT_DIR`, last."""
    args, kept = iter(argv), []
    for arg in args:
        if arg in ("-o", "--output"):
            next(args, None)  # and its value
        elif not arg.startswith("--output="):
            kept.append(arg)
    return [*kept, "-o", str(out_dir)]


def stop_interrupted(what: str, command: Sequence[str]) -> NoReturn:
    """After Ctrl-C: say what was kept and the exact command that continues it (stderr), then exit 130."""
    typer.echo(f"agentflow: interrupted; {what}; continue it with: {shlex.join(command)}", err=True)
    raise typer.Exit(130)


def print_view_hint(run_dir: Path) -> None:
    """The command that shows a finished run in the browser (on stderr: stdout may be --json)."""
    typer.echo(f"see it: agentflow view {shlex.quote(str(run_dir))}", err=True)
