"""Entry point of the `agentflow` command. User mistakes end with one line on stderr and exit code 2."""

from __future__ import annotations

import atexit
import importlib
import pkgutil
import sys
from collections.abc import Sequence

import typer

try:  # typer >= 0.2x vendors click (Abort and Exit moved to typer.exceptions); older releases depend on it
    from typer._click import exceptions as click_exc
    from typer.exceptions import Abort, Exit
except ImportError:  # pragma: no cover
    from click import exceptions as click_exc  # type: ignore[no-redef]
    from click.exceptions import Abort, Exit  # type: ignore[assignment]

from agentflow import __version__
from agentflow.cli._output import redact_std_streams, redacted_output
from agentflow.errors import UserError


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="agentflow",
        help="Graph-defined LLM agent workflows: run, validate, search, repair.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )

    def _print_version(value: bool) -> None:
        if value:
            typer.echo(__version__)
            raise typer.Exit(0)

    @app.callback()
    def _root(
        version: bool = typer.Option(
            False, "--version", help="Print the version and exit.", is_eager=True, callback=_print_version
        ),
    ) -> None:
        """Graph-defined LLM agent workflows: run, validate, search, repair."""

    import agentflow.cli as pkg

    # commands live in subpackages by what they drive (workflow/, repair/, parts/); registered by module name
    found = pkgutil.walk_packages(pkg.__path__, f"{pkg.__name__}.")
    for info in sorted(found, key=lambda m: m.name.rpartition(".")[2]):
        if info.ispkg or info.name.rpartition(".")[2].startswith("_"):
            continue
        module = importlib.import_module(info.name)
        register = getattr(module, "register", None)
        if register is not None:
            register(app)
    return app


def _fail(message: str, code: int = 2) -> int:
    line = " ".join(message.strip().split("\n")[0].split()) or "error"
    typer.echo(f"agentflow: error: {line}", err=True)
    return code


def _show_warning(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
    # one line, like errors, without the file:line that Python's default adds
    typer.echo(f"agentflow: warning: {message}", err=True)


def run(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code (used by `main` and by tests). Everything it prints has its
    control characters escaped (`common.escaping_streams`), then is redacted (`_output.redacted_output`)."""
    from agentflow.cli.common import escaping_streams

    with redacted_output(), escaping_streams():
        return _run(argv)


def _run(argv: Sequence[str] | None) -> int:
    import warnings

    warnings.showwarning = _show_warning
    app = build_app()
    args = list(argv) if argv is not None else sys.argv[1:]
    try:
        # obj: the command line as given, for commands that print how to run them again (common.invoked_argv)
        result = app(args=args, standalone_mode=False, prog_name="agentflow", obj={"argv": args})
    except click_exc.NoArgsIsHelpError as exc:
        typer.echo(exc.ctx.get_help() if exc.ctx else "", err=True)
        return 2
    except click_exc.UsageError as exc:
        hint = f" (see 'agentflow {exc.ctx.command_path.split(' ', 1)[1]} --help')" if exc.ctx and " " in exc.ctx.command_path else " (see 'agentflow --help')"
        return _fail(exc.format_message() + hint)
    except Abort:
        return _fail("aborted", 130)
    except Exit as exc:
        return exc.exit_code
    except UserError as exc:
        return _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    return result if isinstance(result, int) else 0


def main() -> None:
    from agentflow.serving.process import install_signal_handlers

    # SIGTERM/SIGHUP unwind like Ctrl-C: `finally` blocks and atexit stop model servers and sandboxes
    install_signal_handlers()
    # for the whole process: a traceback and what atexit handlers print are redacted too
    for stream in redact_std_streams():
        atexit.register(stream.drain)
    sys.exit(run())


if __name__ == "__main__":
    main()
