"""The working folder a documentation page's blocks run in: it looks like a checkout (the shipped
`workflows/`, `examples/`, `tests/`, `benchmarks/` folders and `.venv/bin/agentflow`), with `agentflow` on
PATH, and holds what the docs' placeholders name: `path/to/repo` (a small git repository whose tests show a
bug: parsing '1.10' gives 1.1, and a CLI with no --verbose flag), `task.json`, `issue.md`.

Placeholders filled from the page's earlier commands: THREAD_ID (the thread of the last run a command
printed; a `--fork` makes a new thread but the docs go on with the one they forked), RUN_DIR and `runs/<id>` (its run folder), CHECKPOINT_ID (the first checkpoint `--history` listed).
A hosted OpenAI model answers from the loopback test server (docs_model_server.py) through OPENAI_BASE_URL."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.core.docs_blocks import ROOT

CHECKOUT_PARTS = ("workflows", "examples", "tests", "benchmarks", "tools", "sandboxes", "docs", "pyproject.toml")
REPO_FILES = {
    "version.py": (
        '"""Version strings."""\n\n\ndef parse(text: str) -> tuple[int, int]:\n'
        '    """\'1.10\' -> (1, 10)."""\n    major, minor = str(float(text)).split(".")\n'
        "    return int(major), int(minor)\n"
    ),
    "cli.py": (
        '"""Print a parsed version."""\n\nimport argparse\n\nfrom version import parse\n\n\n'
        "def main(argv: list[str] | None = None) -> None:\n"
        "    parser = argparse.ArgumentParser()\n    parser.add_argument(\"version\")\n"
        "    args = parser.parse_args(argv)\n    print(parse(args.version))\n\n\n"
        'if __name__ == "__main__":\n    main()\n'
    ),
    "tests/test_version.py": (
        "from version import parse\n\n\ndef test_one_digit_minor():\n    assert parse(\"1.2\") == (1, 2)\n\n\n"
        "def test_two_digit_minor():\n    assert parse(\"1.10\") == (1, 10)\n"
    ),
    "conftest.py": "",
}
FILES = {
    "task.json": '{"task": "add a --verbose flag"}\n',
    "issue.md": "Parsing '1.10' gives 1.1: `parse('1.10')` returns (1, 1), expected (1, 10).\n",
}
THREAD = re.compile(r"\(thread (\S+)\)|· thread (\S+) ·|\"thread_id\": \"([^\"]+)\"")
RUN_DIR = re.compile(r"agentflow view (\S+)")
CHECKPOINT = re.compile(r"(?m)^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f-]+)\s+step ")


def make_repo(path: Path) -> None:
    for name, text in REPO_FILES.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git = ["git", "-c", "user.name=docs", "-c", "user.email=docs@example.com"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "version parsing"]):
        subprocess.run([*git, *args], cwd=path, check=True, capture_output=True)


def _shim(path: Path, argv: str) -> None:
    path.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}${{PYTHONPATH:+:$PYTHONPATH}}" exec {argv} "$@"\n')
    path.chmod(0o755)


@dataclass
class PageSession:
    """One page's working folder and what its commands printed so far."""

    work: Path
    env: dict[str, str]
    found: dict[str, str] = field(default_factory=dict)
    program: str = ""
    """The page's python program so far (for `python continues` blocks)."""

    @classmethod
    def create(cls, root: Path, model_url: str) -> PageSession:
        work, bin_dir = root / "work", root / ".venv" / "bin"
        (work / "path" / "to" / "repo").mkdir(parents=True)
        bin_dir.mkdir(parents=True)
        for name in CHECKOUT_PARTS:
            (work / name).symlink_to(ROOT / name)
        (work / ".venv").symlink_to(root / ".venv")
        _shim(bin_dir / "agentflow", f'"{sys.executable}" -m agentflow.cli.main')
        _shim(bin_dir / "python", f'"{sys.executable}"')
        make_repo(work / "path" / "to" / "repo")
        for name, text in FILES.items():
            (work / name).write_text(text)
        env = {
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(ROOT),
            "OPENAI_BASE_URL": model_url,
            "OPENAI_API_KEY": "sk-docs-loopback",
        }
        return cls(work, env)

    def fill(self, command: str) -> str:
        """`command` with the placeholders an earlier command gave a value."""
        for name, value in self.found.items():
            command = command.replace(name, value)
        return command

    def note(self, command: str, output: str) -> None:
        threads = [next(filter(None, groups)) for groups in THREAD.findall(output)]
        if threads and "--fork" not in command:
            self.found["THREAD_ID"] = threads[-1]
        checkpoints = CHECKPOINT.findall(output)
        if checkpoints:
            self.found["CHECKPOINT_ID"] = checkpoints[0]
        dirs = RUN_DIR.findall(output)
        if dirs:
            self.found["RUN_DIR"] = self.found["runs/<id>"] = dirs[-1]
