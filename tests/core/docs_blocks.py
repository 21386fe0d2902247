"""The fenced blocks of README.md and docs/**/*.md, and how each is run by tests/core/test_docs_snippets.py.

Rules (the docs' contributors read them here):
- Every fence names its language. `bash`, `sh`, `shell` and `console` blocks are commands (in `console`, the
  lines after `$ `); `python` blocks are programs. Other languages (`text`, `yaml`, `json`, ...) are not run,
  except a block whose info string names a file (```` ```yaml file=my.yaml ````): it is written to the page's
  working folder before the page's commands run, so a command can use it.
- Every command block and python block runs as written. A comment on the line right before the fence changes
  that, and only with a reason: `<!-- doc-test: skip (REASON) -->`. `<!-- doc-test: requires docker, llama -->`
  runs the block under those pytest markers (a block whose code, comments aside, names `local:` or
  `--serve llamacpp` needs llama, one naming `--sandbox docker` needs docker, without a comment).
- A python block is a whole program; ```` ```python continues ```` runs after the page's previous python
  block, in the same program (a page that builds one program step by step).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"(?ms)^(?P<fence>`{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$")
MARKER = re.compile(r"<!--\s*doc-test:(?P<text>.*?)-->\s*$")
COMMAND_LANGS = ("bash", "sh", "shell", "console")
REQUIREMENTS = ("docker", "llama")
IMPLIED = {"llama": ("local:", "--serve llamacpp"), "docker": ("--sandbox docker",)}
"""Words in a block that mean it needs a marker's resources, with no comment needed."""


def doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    flags: tuple[str, ...]
    body: str
    marker: str | None = None
    """The text of the `<!-- doc-test: ... -->` comment right before the fence, if any."""
    problems: tuple[str, ...] = field(default=())

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.lang in COMMAND_LANGS or self.lang == "python"

    @property
    def skip_reason(self) -> str | None:
        m = re.fullmatch(r"skip\s*\((.+)\)", self.marker or "")
        return m[1].strip() if m else None

    @property
    def file(self) -> str | None:
        return next((f.split("=", 1)[1] for f in self.flags if f.startswith("file=")), None)

    def requires(self) -> list[str]:
        named = re.fullmatch(r"requires\s+(.+)", self.marker or "")
        wanted = {w.strip() for w in named[1].split(",")} if named else set()
        wanted |= {f.split("=", 1)[1] for f in self.flags if f.startswith("requires=")}
        code = "\n".join(line.split("#", 1)[0] for line in self.body.splitlines())  # what runs, not comments
        wanted |= {need for need, words in IMPLIED.items() if any(w in code for w in words)}
        return sorted(wanted)


def _marker_problems(marker: str | None) -> tuple[str, ...]:
    if marker is None:
        return ()
    if marker.startswith("skip"):
        ok = re.fullmatch(r"skip\s*\(\s*\S.*\)", marker)
        return () if ok else (f"'doc-test: {marker}' needs a reason: <!-- doc-test: skip (REASON) -->",)
    named = re.fullmatch(r"requires\s+(.+)", marker)
    if named and all(w.strip() in REQUIREMENTS for w in named[1].split(",")):
        return ()
    return (f"unknown 'doc-test: {marker}': use 'skip (REASON)' or 'requires {', '.join(REQUIREMENTS)}'",)


def page_blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        lang, *flags = m["info"].split() or [""]
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker_match = MARKER.search(before)
        marker = " ".join(marker_match["text"].split()) if marker_match else None
        problems = list(_marker_problems(marker))
        if not lang:
            problems.append("the fence names no language (```bash, ```python, ```text, ...)")
        found.append(Block(path, text[: m.start()].count("\n") + 1, lang, tuple(flags), m["body"], marker,
                           tuple(problems)))
    return found


def blocks() -> list[Block]:
    return [b for path in doc_pages() for b in page_blocks(path)]


def commands(block: Block) -> list[str]:
    """The block's commands, each a complete shell command (a line, or lines joined by `\\` or by an open
    quote, loop or pipe: whatever `bash -n` reads as unfinished). In `console` blocks a command starts at `$ `
    and goes on over the lines it needs (a `> ` prompt dropped); other lines are its output."""
    out, chunk = [], ""
    for line in block.body.splitlines():
        if block.lang == "console" and not chunk:
            if not line.startswith("$ "):
                continue  # output
            line = line[2:]
        elif block.lang == "console":
            line = line.removeprefix("> ")
        chunk = f"{chunk}\n{line}" if chunk else line
        if chunk.endswith("\\") or not _complete(chunk):
            continue
        if any(s.strip() and not s.strip().startswith("#") for s in chunk.splitlines()):
            out.append(chunk)
        chunk = ""
    if chunk.strip():
        out.append(chunk)  # an unfinished command: running it reports the syntax error
    return out


def _complete(chunk: str) -> bool:
    return subprocess.run(["bash", "-n", "-c", chunk], capture_output=True, check=False).returncode == 0
