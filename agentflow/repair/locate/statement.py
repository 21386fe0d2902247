"""What a problem statement is, read once (`read_statement`): a user's report with examples to run, a
failing-test report (failing tests, pytest's traceback and assertion output), or prose; the record gives every
step what it takes: examples, failing tests, traceback frames, the assertion output, the failure output a
retry's prompt shows.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from agentflow.pysyntax import parsed

StatementKind = Literal["examples", "failing_tests", "prose"]

_NODE_ID = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w.-]+\.py(?:::[A-Za-z_]\w*)+(?:\[[^\]\n]*\])?)")
"""A pytest node id: `path/test_x.py::Class::test_name[param]`."""
_FRAME = re.compile(
    r"""^\s*File "(?P<p1>[^"]+\.py)", line (?P<l1>\d+)(?:, in (?P<f1>[\w<>.]+))?"""
    r"""|^(?P<p2>[\w./-]+\.py):(?P<l2>\d+):(?: in (?P<f2>[\w<>.]+))?""",
    re.MULTILINE,
)
"""A traceback frame: Python's `File "p.py", line 3, in f` or pytest's `p.py:3: in f` (`--tb=short`) and
`p.py:3: ValueError` (the long format's last frame, no function)."""
_LOCATED = re.compile(r"\S+\.py:\d+: \w")
"""pytest's location line beside its `E` lines (`test_x.py:12: in test_x`, `p.py:3: ValueError`)."""
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::.*)?$")
_FENCE = re.compile(r"```[ \t]*(\w*)[^\n]*\n(.*?)```", re.DOTALL)
DOCTEST_LINE = re.compile(r"^\s*(>>>|\.\.\.)(?: |$)(.*)$")
"""A doctest's prompt line (`>>> code` or a `... ` continuation): the prompt, then the code."""
MAX_EXAMPLE_CHARS = 6000


@dataclass(frozen=True)
class Frame:
    """One frame of a traceback the statement shows, as printed (a path as the report names it)."""

    path: str
    line: int
    function: str = ""
    """The frame's function; "" where the format does not say (pytest's long format's last frame)."""


@dataclass(frozen=True)
class Statement:
    """A problem statement as the repair's steps read it."""

    kind: StatementKind
    failing_tests: tuple[str, ...] = ()
    """The pytest node ids the statement names, in its order (a failing-test report's failing tests)."""
    frames: tuple[Frame, ...] = ()
    """Its traceback frames in printed order (outermost first, the deepest last)."""
    assertion: str = ""
    """The assertion or exception output: pytest's `E` lines, else a traceback's last exception line."""
    examples: tuple[str, ...] = ()
    """The runnable statements of its examples (`issue_examples`); a failing-test report's code blocks are the
    test's code and its output, not examples: only its `>>>` lines count."""
    failure: str = ""
    """The failure as printed: its last traceback (`last_traceback`), else pytest's `E` lines with the
    `file.py:LINE:` lines beside them."""

    def tests_in(self, sources: Mapping[str, str]) -> list[str]:
        """The failing tests the workspace holds (`sources`: its Python files): the file is there and defines the
        test function."""
        present = []
        for test_id in self.failing_tests:
            path, *names = test_id.split("::")
            name = names[-1].split("[", 1)[0] if names else ""
            if path in sources and re.search(rf"^\s*(?:async\s+)?def {re.escape(name)}\(", sources[path], re.MULTILINE):
                present.append(test_id)
        return present


@functools.lru_cache(maxsize=32)  # every edit's ranking reads the same statement again
def read_statement(text: str) -> Statement:
    """The typed record of a problem statement (see the module docstring)."""
    failing = tuple(dict.fromkeys(_NODE_ID.findall(text)))
    examples = tuple(issue_examples(text, code_blocks=not failing))
    kind: StatementKind = "failing_tests" if failing else "examples" if examples else "prose"
    asserted = [line.rstrip() for line in text.splitlines() if line.startswith("E ") or _LOCATED.match(line)]
    failure = last_traceback(text) or "\n".join(asserted)
    return Statement(kind, failing, tuple(read_frames(text)), _assertion(text), examples, failure)


def read_frames(text: str) -> list[Frame]:
    """The traceback frames a text shows (a statement, a test run's output), in printed order."""
    return [Frame(m.group("p1") or m.group("p2"), int(m.group("l1") or m.group("l2")), m.group("f1") or m.group("f2") or "")
            for m in _FRAME.finditer(text)]


def last_traceback(text: str) -> str:
    """The last Python traceback a text shows, to its exception line (the first line at column 0 after it)."""
    at = text.rfind("Traceback (most recent call last)")
    if at < 0:
        return ""
    lines = text[at:].splitlines()
    end = next((i for i, line in enumerate(lines[1:], 1) if line[:1].strip()), len(lines) - 1)
    return "\n".join(lines[: end + 1])


def _assertion(text: str) -> str:
    """pytest's `E` lines (their first block), else the exception line ending the last traceback."""
    lines = text.splitlines()
    marked: list[str] = []
    for line in lines:
        if line.startswith("E ") or line == "E":
            marked.append(line[1:].strip())
        elif marked:
            break
    if marked:
        return "\n".join(marked).strip()
    last = max((i for i, line in enumerate(lines) if _FRAME.match(line)), default=None)
    if last is None:
        return ""
    return next((line.strip() for line in lines[last + 1 :] if _EXCEPTION_LINE.match(line.strip())), "")


def issue_examples(text: str, *, code_blocks: bool = True) -> list[str]:
    """The runnable statements of a report: each `>>>` line with its `...` continuations, and (`code_blocks`)
    every code block without prompts that parses as Python and calls something."""
    out: list[str] = []
    blocks = [body for _, body in _FENCE.findall(text)]
    outside = _FENCE.sub("\n", text)
    for chunk in [*blocks, outside]:
        lines = chunk.split("\n")
        if any(line.lstrip().startswith(">>>") for line in lines):
            out.extend(_prompted(lines))
        elif code_blocks and chunk is not outside and _runnable(chunk):
            out.append(chunk.strip("\n"))
    statements, total = [], 0
    for s in out:
        if s.strip() and total + len(s) <= MAX_EXAMPLE_CHARS:
            statements.append(s)
            total += len(s)
    return statements


def _prompted(lines: list[str]) -> list[str]:
    statements: list[list[str]] = []
    for line in lines:
        m = DOCTEST_LINE.match(line)
        if m is None:
            continue
        if m.group(1) == ">>>" or not statements:
            statements.append([m.group(2)])
        else:
            statements[-1].append(m.group(2))
    return ["\n".join(s) for s in statements if parsed("\n".join(s)) is not None]


def _runnable(code: str) -> bool:
    tree = parsed(code)
    return tree is not None and any(isinstance(node, (ast.Call, ast.Import, ast.ImportFrom, ast.Subscript, ast.Compare))
                                    for node in ast.walk(tree))
