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


ASK = {"name": "asks", "state": {"prompt": {"type": "str"}, "text": {"type": "str"}, "model": {"type": "str"}},
       "nodes": {"ask": {"fn": "tests.cli.nodes:ask", "next": "END"}}}


@pytest.mark.parametrize("model", ["function:helpers.py:reply", "function:helpers:reply",
                                   "function:sub/../helpers.py:reply"])
def test_a_function_model_resolves_from_the_workflow_file(model: str, tmp_path: Any,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """`model: function:...` in a workflow file names a file beside it, whatever the current folder."""
    import json

    import yaml

    from agentflow.cli.main import run

    folder = tmp_path / "flows"
    (folder / "sub").mkdir(parents=True)
    (folder / "helpers.py").write_text("def reply(request):\n    return 'from beside the workflow'\n")
    workflow = folder / "asks.yaml"
    workflow.write_text(yaml.safe_dump({**ASK, "model": model}))
    assert run(["graph", "validate", str(workflow)]) == 0, capsys.readouterr()
    capsys.readouterr()
    code = run(["run", str(workflow), "-o", str(tmp_path / "runs"), "--json", "-i", '{"prompt": "hi"}'])
    captured = capsys.readouterr()
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert (code, result["state"]["text"]) == (0, "from beside the workflow"), captured.err


@pytest.mark.parametrize("model", ["function:nope.py:reply", "function:helpers.py:nope"])
def test_validate_reports_a_missing_function_model(model: str, tmp_path: Any,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from agentflow.cli.main import run

    (tmp_path / "helpers.py").write_text("def reply(request):\n    return 'x'\n")
    workflow = tmp_path / "asks.yaml"
    workflow.write_text(yaml.safe_dump({**ASK, "model": model}))
    assert run(["graph", "validate", str(workflow)]) != 0
    said = capsys.readouterr()
    assert "model: " in said.out + said.err and "nope" in said.out + said.err, said
