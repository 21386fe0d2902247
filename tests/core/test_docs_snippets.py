"""The docs run as written: every ```python block in README.md and docs/ is a complete program, run here
from an empty folder (models are replayed or scripted inside the block), or is marked `python fragment`;
`python requires=docker|llama` blocks run where those are available. Every `agentflow ...` line in a
```bash block names a real command with real options, and a ```bash run block runs, line by line, from an
empty folder (with `agentflow` being this checkout's CLI)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"(?ms)^(?P<fence>`{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    flags: tuple[str, ...]
    body: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            lang, *flags = m["info"].split() or [""]
            found.append(Block(path, text[: m.start()].count("\n") + 1, lang, tuple(flags), m["body"]))
    return found


PYTHON = [b for b in blocks() if b.lang == "python" and "fragment" not in b.flags]
SHELL = [b for b in blocks() if b.lang in ("bash", "sh", "console")]


def _marks(block: Block) -> list[pytest.MarkDecorator]:
    return [getattr(pytest.mark, flag.split("=", 1)[1]) for flag in block.flags if flag.startswith("requires=")]


def test_every_python_block_is_complete_or_marked() -> None:
    """A complete program has no top-level await and no path into tests/ (so it runs from any folder)."""
    bad = []
    for block in PYTHON:
        top_level_await = any(line.startswith("await ") or " = await " in line and not line.startswith(" ")
                              for line in block.body.splitlines())
        if top_level_await or "tests/" in block.body:
            bad.append(block.id)
    assert not bad, f"mark these `python fragment` or make them complete programs: {bad}"


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id, marks=_marks(b)) for b in PYTHON])
def test_python_block_runs(block: Block, tmp_path: Path) -> None:
    if any(f == "requires=llama" for f in block.flags):
        from tests.serving.conftest import require_llama

        require_llama()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", block.body], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"{block.id} failed:\n{proc.stderr[-3000:]}"


RUNNABLE_SHELL = [b for b in SHELL if "run" in b.flags]


def test_the_walkthrough_has_runnable_shell_blocks() -> None:
    assert any(b.path.name == "getting-started.md" for b in RUNNABLE_SHELL)


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id, marks=_marks(b)) for b in RUNNABLE_SHELL])
def test_runnable_shell_block_runs(block: Block, tmp_path: Path) -> None:
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir()
    work.mkdir()
    shim = bin_dir / "agentflow"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m agentflow.cli.main "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(["bash", "-eu", "-o", "pipefail", "-c", block.body], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"{block.id} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"


def _agentflow_lines(block: Block) -> list[list[str]]:
    commands = []
    text = re.sub(r"\\\n\s*", " ", block.body)
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        line = line.removeprefix("$ ")
        words = shlex.split(line, comments=True) if line else []
        while words and "=" in words[0] and not words[0].startswith("-"):  # VAR=value prefixes
            words.pop(0)
        if words and Path(words[0]).name == "agentflow":
            commands.append(words[1:])
    return commands


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id) for b in SHELL])
def test_shell_block_names_real_commands_and_options(block: Block) -> None:
    import typer

    try:  # typer >= 0.2x vendors click
        from typer._click import Context
    except ImportError:  # pragma: no cover
        from click import Context  # type: ignore[no-redef]

    from agentflow.cli.main import build_app

    root = typer.main.get_command(build_app())
    for argv in _agentflow_lines(block):
        command = root
        args = list(argv)
        while hasattr(command, "get_command") and args and not args[0].startswith("-"):
            sub = command.get_command(Context(command), args[0])
            assert sub is not None, f"{block.id}: unknown command in 'agentflow {' '.join(argv)}'"
            command, args = sub, args[1:]
        known = {opt for p in command.params for opt in getattr(p, "opts", []) + getattr(p, "secondary_opts", [])}
        for word in args:
            if word == "--":  # the rest goes to another program
                break
            if word.startswith("-") and word != "-":
                flag = word.split("=", 1)[0]
                assert flag in known, f"{block.id}: 'agentflow {' '.join(argv)}' uses unknown option {flag}"
