"""docs/cli.md must name every command and every option the CLI has (regenerate with docs/gen_cli_reference.py)."""

from pathlib import Path

from typer.main import get_command

from agentflow.cli.main import build_app

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _commands(cmd, path):  # type: ignore[no-untyped-def]
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, [*path, name])


def test_every_command_and_option_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    missing = []
    for path, cmd in _commands(get_command(build_app()), ["agentflow"]):
        if len(path) == 1:
            continue
        section = f"## `{' '.join(path)}`"
        if section not in text:
            missing.append(section)
            continue
        body = text.split(section, 1)[1].split("\n## ", 1)[0]
        for param in cmd.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-") and opt not in body:
                    missing.append(f"{' '.join(path)} {opt}")
    assert not missing, f"docs/cli.md is stale (run docs/gen_cli_reference.py): {missing}"
