"""Edits as fill-in-the-middle: lines of a window are cut out (a hole) and a code model writes what goes there,
given the code before and after it and the issue, in its own fill-in-the-middle format (`models.fim`). The
model cannot give back code it is not shown, so a fill is a change unless it writes the same lines again: the
edit form for a branch whose rewrites keep returning the window unchanged.

A hole is one statement's own lines: a simple statement whole, a compound statement's header (`if ...:`,
`for ...:`, a `def` line with its arguments); the window's statements are holes in turn, the lines the line
spectrum marked first.
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from dataclasses import dataclass
from functools import cached_property

from agentflow.models.fim import FimFormat
from agentflow.repair.edit.steps import ReadEdits

PREFIX_LINES, SUFFIX_LINES = 200, 80
"""Code shown around a hole: the lines before it (a short file's top and imports) and after it."""
FILL_TOKENS = 200
"""A fill's token limit: a statement or a few, not a function."""


@dataclass(frozen=True)
class Hole:
    """Lines `start`..`end` (1-based, inclusive) of a file, cut out for the model to fill."""

    path: str
    start: int
    end: int
    text: str
    """The whole file."""

    @cached_property
    def _lines(self) -> list[str]:
        return self.text.splitlines(keepends=True)

    @property
    def before(self) -> list[str]:
        return self._lines[:self.start - 1]

    @property
    def removed(self) -> list[str]:
        return self._lines[self.start - 1:self.end]

    @property
    def after(self) -> list[str]:
        return self._lines[self.end:]

    @property
    def indent(self) -> int:
        """The indentation of the hole's first line."""
        first = next((line for line in [*self.removed, *self.after] if line.strip()), "")
        return len(first) - len(first.lstrip())

    @property
    def key(self) -> str:
        """`path:start-end`, the hole's name in a branch's record of holes filled."""
        return f"{self.path}:{self.start}-{self.end}"


def _own_lines(node: ast.stmt) -> tuple[int, int]:
    """The lines a statement alone occupies: a simple one whole, a compound one up to its body (the header)."""
    body = getattr(node, "body", None)
    end = body[0].lineno - 1 if isinstance(body, list) and body else (node.end_lineno or node.lineno)
    return node.lineno, max(end, node.lineno)


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def statement_holes(path: str, text: str, start: int, end: int, marks: Collection[int] = ()) -> list[Hole]:
    """The holes of lines `start`..`end` of a file: each statement's own lines (docstrings left out), those
    holding a `marks` line first, then the others in file order, the `def`/`class` lines last (an argument
    list is rarely where the behaviour goes wrong). None when the file does not parse."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    spans: dict[tuple[int, int], bool] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not _is_docstring(node):
            a, b = _own_lines(node)
            if start <= a and b <= end:
                spans[a, b] = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    def rank(span: tuple[int, int]) -> tuple[int, int]:
        marked = any(span[0] <= line <= span[1] for line in marks)
        return (0 if marked else 2 if spans[span] else 1), span[0]
    return [Hole(path, a, b, text) for a, b in sorted(spans, key=rank)]


def fill_prompt(fmt: FimFormat, hole: Hole, issue: str, repo: str) -> str:
    """The raw prompt of a hole: the issue as the repository's `ISSUE.md`, then the hole's file around it."""
    return fmt.prompt(hole.path, "".join(hole.before[-PREFIX_LINES:]), "".join(hole.after[:SUFFIX_LINES]),
                      repo=repo, files=[("ISSUE.md", issue)])


def cut_at_suffix(middle: str, after: list[str]) -> str:
    """The fill up to where it starts repeating the code after the hole (its next two non-blank lines, met
    again: a model often writes on past the hole)."""
    nonblank = [line.strip() for line in after if line.strip()][:2]
    lines = middle.splitlines(keepends=True)
    for i in range(len(lines)):
        ahead = [line.strip() for line in lines[i:] if line.strip()][:len(nonblank)]
        if nonblank and ahead and lines[i].strip() == nonblank[0] and ahead == nonblank[:len(ahead)]:
            return "".join(lines[:i])
    return middle


def cut_at_block_end(middle: str, indent: int) -> str:
    """The fill up to its first line that leaves the hole's block: a non-blank line indented less than the hole,
    or a Markdown code fence (a model past the hole writes the next definitions, or prose)."""
    lines = middle.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.strip() and (len(line) - len(line.lstrip()) < indent or line.lstrip().startswith("```")):
            return "".join(lines[:i])
    return middle


def read_fill(raw: str, hole: Hole) -> ReadEdits:
    """What a fill does to the hole's file: `noop` when it puts back the same statements, `apply_error` when
    the file does not parse with it (or it is empty), else the new file."""
    middle = cut_at_block_end(cut_at_suffix(raw, hole.after), hole.indent)
    middle += "" if not middle or middle.endswith("\n") else "\n"
    def code(lines: list[str]) -> list[str]:
        return [line.strip() for line in lines if line.strip()]
    if code(middle.splitlines()) == code(hole.removed):
        return ReadEdits("noop", errors=[f"the fill put the same lines back ({hole.key})"])
    if not code(middle.splitlines()):
        return ReadEdits("apply_error", errors=["the fill is empty"])
    new = "".join(hole.before) + middle + "".join(hole.after)
    try:
        ast.parse(new)
    except SyntaxError as exc:
        why = f"{hole.path} does not parse with the fill: {exc.msg} (line {exc.lineno})"
        return ReadEdits("apply_error", errors=[why])
    return ReadEdits("ok", {hole.path: new})
