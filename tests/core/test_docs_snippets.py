"""The docs run as written: every command block and python block of README.md and docs/ (the rules are in
docs_blocks.py: a block is skipped only by a `<!-- doc-test: skip (REASON) -->` comment). The blocks of a page
run in order in one working folder (docs_fixture.py: a checkout-like folder with a fixture repository at
`path/to/repo`); hosted models answer from a loopback test model (docs_model_server.py). Every `agentflow ...`
line, skipped or not, names a real command with real options."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.core.docs_blocks import Block, blocks, commands
from tests.core.docs_fixture import PageSession
from tests.core.docs_model_server import serving

COMMAND_SECONDS = 180
"""Longest one documented command or program may take."""

ALL = blocks()
RUNNABLE = [b for b in ALL if b.runs or b.file]
SHELL = [b for b in ALL if b.lang in ("bash", "sh", "shell", "console")]


def _param(block: Block) -> object:
    marks = [getattr(pytest.mark, need) for need in block.requires()]
    return pytest.param(block, id=block.id, marks=marks)


def test_every_fence_names_its_language_and_markers_are_well_formed() -> None:
    bad = [f"{b.id}: {problem}" for b in ALL for problem in b.problems]
    assert not bad, "\n".join(bad)


def test_the_docs_have_blocks_of_every_kind() -> None:
    langs = {b.lang for b in RUNNABLE if not b.skip_reason}
    assert {"bash", "python"} <= langs, langs


@pytest.fixture(scope="session")
def model_url() -> Iterator[str]:
    with serving() as url:
        yield url


_SESSIONS: dict[Path, PageSession] = {}


@pytest.fixture
def session(block: Block, model_url: str, tmp_path_factory: pytest.TempPathFactory) -> PageSession:
    if block.path not in _SESSIONS:
        _SESSIONS[block.path] = PageSession.create(tmp_path_factory.mktemp("doc"), model_url)
    return _SESSIONS[block.path]


def _need(block: Block) -> None:
    assert not block.problems, "\n".join(block.problems)
    if block.skip_reason:
        pytest.skip(f"the doc says: {block.skip_reason}")
    if "llama" in block.requires():
        from tests.serving.conftest import require_llama

        require_llama("qwen2.5-coder-1.5b" if "qwen" in block.body else "gemma3-270m")


def _run(argv: list[str], session: PageSession, what: str) -> None:
    proc = subprocess.run(argv, cwd=session.work, env=session.env, capture_output=True, text=True,
                          timeout=COMMAND_SECONDS, check=False)
    session.note(argv[-1], proc.stderr + proc.stdout)
    assert proc.returncode == 0, f"{what}\nexit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"


@pytest.mark.parametrize("block", [_param(b) for b in RUNNABLE])
def test_block_runs_as_written(block: Block, session: PageSession) -> None:
    _need(block)
    if block.file:
        (session.work / block.file).write_text(block.body)
    if block.lang == "python":
        program = f"{session.program}\n{block.body}" if "continues" in block.flags else block.body
        session.program = program
        _run([sys.executable, "-c", program], session, f"{block.id} (python)")
    elif block.lang in ("bash", "sh", "shell", "console"):
        for command in commands(block):
            filled = session.fill(command)
            _run(["bash", "-e", "-o", "pipefail", "-c", filled], session, f"{block.id}: {filled}")


def _agentflow_lines(block: Block) -> list[list[str]]:
    found = []
    for command in commands(block):
        line = re.sub(r"\\\n\s*", " ", command).split(" #", 1)[0].strip()
        words = shlex.split(line, comments=True) if line else []
        while words and "=" in words[0] and not words[0].startswith("-"):  # VAR=value prefixes
            words.pop(0)
        if words and Path(words[0]).name == "agentflow":
            found.append(words[1:])
    return found


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
