"""Spellings a user reads in one place work in every other: every command with a `--model` takes `-m` for it
(as `run` does), and `-m X` is parsed as that command's model."""

from __future__ import annotations

from typing import Any

import pytest
import typer

from agentflow.cli.main import build_app


def _commands() -> dict[str, Any]:
    found: dict[str, Any] = {}

    def walk(command: Any, path: tuple[str, ...]) -> None:
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, (*path, name))
        else:
            found[" ".join(path)] = command

    walk(typer.main.get_command(build_app()), ())
    return found


COMMANDS = _commands()
WITH_MODEL = sorted(name for name, cmd in COMMANDS.items()
                    if any("--model" in getattr(p, "opts", []) for p in cmd.params))


def test_the_commands_with_a_model_option_are_found() -> None:
    assert {"run", "repair", "bench"} <= set(WITH_MODEL)


@pytest.mark.parametrize("name", WITH_MODEL)
def test_every_model_option_takes_dash_m(name: str, tmp_path: Any) -> None:
    command = COMMANDS[name]
    (param,) = [p for p in command.params if "--model" in getattr(p, "opts", [])]
    assert "-m" in param.opts, f"agentflow {name}: --model has no -m"
    with command.make_context(name, ["-m", "test:echo"], resilient_parsing=True) as ctx:
        assert ctx.params[param.name] == "test:echo"
