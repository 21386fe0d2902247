"""Line-tagged edits (`edit_format: tagged`): the window's lines are shown each after a tag, its line number in
the file (`12| code`), and the answer names the lines it replaces and gives their new code::

    Replace lines 12-13:
    ```python
        total = sum(values)
    ```

Copying the window back is then no answer: an answer that changes nothing names no line, or gives the named
lines' code as it was. This module shows the tags and reads and applies the replacements; `steps.read_tagged`
turns the outcome into the answer's `ReadEdits` (and reads a window given back whole as a rewrite)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from agentflow.repair.edit.edits import indent_of

_FENCE = re.compile(r"```[ \t]*[^\n`]*\n(.*?)(?:```|\Z)", re.DOTALL)
"""A fenced block's code (an unclosed last block runs to the end; an empty block is a deletion)."""
_TAG = re.compile(r"^[ \t]*\*?[ \t]*(\d+)[ \t]?\|[ \t]?")
"""A tag copied before a code line (`12| code`, right-aligned ` 9| code`); the one space after `|` is the tag's."""
_NUMBER = r"\d+\|?"
_SEPARATOR = r"-|–|—|\bto\b|\bthrough\b|\bthru\b|\buntil\b|\band\b|,|&"
_RANGE_WORDS = frozenset({"-", "–", "—", "to", "through", "thru", "until"})
_SPEC = rf"{_NUMBER}(?:\s*(?:{_SEPARATOR})\s*{_NUMBER})*"
_NAMED = (
    re.compile(rf"\breplace\s+(?:the\s+)?(?:lines?\s*)?({_SPEC})", re.IGNORECASE),
    re.compile(rf"\blines?\s*[:#]?\s*({_SPEC})", re.IGNORECASE),
    re.compile(rf"^[^\w]*({_SPEC})(?:\s+with)?[^\w]*$", re.IGNORECASE),  # the numbers alone: `12-13:`
)
"""How an answer names the lines a block replaces, most explicit first (`Replace lines 12-13:`, `Lines 12, 13:`,
`12 to 13:`)."""
_OPENING = re.compile(r"\s*(?:async\s+def|def|class)\s")
"""The first line of a definition."""


@dataclass(frozen=True)
class Replacement:
    """Lines `first`..`last` of the file (its line numbers, the tags) replaced by `lines` (as the answer wrote
    them, tags removed; empty: the lines deleted)."""

    first: int
    last: int
    lines: tuple[str, ...]


def tagged_lines(snippet: str, first: int) -> str:
    """The window's code (`snippet`, at column 0) with each line's number in the file before it as its tag:
    `12| code`. The numbers are right-aligned, so the code's indentation reads the same on every line."""
    lines = snippet.split("\n")
    width = len(str(first + len(lines) - 1))
    return "\n".join(f"{first + n:>{width}}| {line}".rstrip() for n, line in enumerate(lines))


def named_lines(spec: str) -> tuple[int, int]:
    """(first, last) of the lines `spec` names (`12`, `12-13`, `12 to 13`, `12, 13`); ValueError when they are not
    one run of lines (`12, 14`)."""
    parts = re.split(rf"\s*({_SEPARATOR})\s*", spec.lower())
    numbers = [int(part.rstrip("|")) for part in parts[0::2]]
    named = {numbers[0]}
    for separator, before, after in zip(parts[1::2], numbers, numbers[1:], strict=False):
        low, high = sorted((before, after))
        named |= set(range(low, high + 1)) if separator in _RANGE_WORDS else {after}
    ordered = sorted(named)
    if ordered[-1] - ordered[0] + 1 != len(ordered):
        raise ValueError(f"lines {spec.strip()} are not one run of lines: give each run its own block")
    return ordered[0], ordered[-1]


def _spec_in(text: str) -> str | None:
    """The line numbers named on the last line of `text` that names any (`_NAMED`), or None."""
    for line in reversed(text.split("\n")):
        for pattern in _NAMED:
            if found := pattern.search(line.strip()):
                return found.group(1)
    return None


def _untagged(block: str) -> tuple[list[str], list[int]]:
    """A block's lines without the tags copied into them, and the numbers of those tags."""
    lines, tags = [], []
    for line in block.split("\n"):
        if tag := _TAG.match(line):
            tags.append(int(tag.group(1)))
            line = line[tag.end() :]
        lines.append(line.rstrip())
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines, tags


def _replacement(header: str, block: str) -> Replacement | list[str]:
    """The replacement a block makes (the lines named in the text before it, else in a first comment line of
    the block, else by the tags copied into its lines); the block's lines when it names none."""
    lines, tags = _untagged(block)
    spec = _spec_in(header)
    if spec is None and lines and lines[0].lstrip().startswith("#"):
        spec = _spec_in(lines[0].lstrip("# \t"))
        lines = lines[1:] if spec is not None else lines
    if spec is not None:
        first, last = named_lines(spec)
    elif tags:
        first, last = min(tags), max(tags)
    else:
        return lines
    return Replacement(first, last, tuple(lines))


def read_replacements(text: str) -> tuple[list[Replacement], list[list[str]]]:
    """The replacements an answer names, in the answer's order, without repeats; and the code of its blocks that
    name no lines. ValueError (a one-line reason) for lines named that are not one run."""
    replacements: list[Replacement] = []
    unnamed: list[list[str]] = []
    end, text = 0, text.replace("\r\n", "\n")
    for fence in _FENCE.finditer(text):
        read = _replacement(text[end : fence.start()], fence.group(1))
        end = fence.end()
        if isinstance(read, list):
            unnamed.append(read)
        elif read not in replacements:  # the same block given twice is one replacement, not two that overlap
            replacements.append(read)
    return replacements, unnamed


def gives_back(lines: Sequence[str], window: Sequence[str], skip: range = range(0), *, share: float = 0.8) -> bool:
    """Whether `lines` (an answer's block) gives the `window` back whole rather than replacing the lines `skip`
    (0-based indices into `window`) names: it holds the window's first `def` or `class` line, or `share` of its
    code lines, outside `skip` (a whole function under `Replace line 7:` would nest a second copy in the first)."""
    given = {line.strip() for line in lines}
    opening = next((n for n, line in enumerate(window) if _OPENING.match(line)), None)
    if opening is not None and opening not in skip and window[opening].strip() in given:
        return True
    kept = [line.strip() for n, line in enumerate(window) if n not in skip and line.strip()]
    return len(kept) >= 2 and sum(line in given for line in kept) >= share * len(kept)


def reindented(lines: Sequence[str], indent: str) -> list[str]:
    """`lines` shifted so that the first code line has `indent`, the others keeping their indentation relative
    to it. Not `steps._reindent`'s dedent: a replacement's first line need not be its least indented (the end of
    a block's body and the line after it), and small models give it at column 0, as shown, or as in the file."""
    first = next((indent_of(line) for line in lines if line.strip()), "")
    shifted = []
    for line in lines:
        if not line.strip():
            shifted.append("")
            continue
        depth = len(indent_of(line)) - len(first)
        prefix = indent + " " * depth if depth >= 0 else indent[: max(0, len(indent) + depth)]
        shifted.append(prefix + line.lstrip())
    return shifted


def _indent_at(old: Sequence[str], first: int, last: int) -> str:
    """The indentation replacing lines `first`..`last` (1-based) takes: their first code line's, else (blank lines
    only) the next code line's, else the previous one's."""
    inside, after, before = old[first - 1 : last], old[last:], old[: first - 1][::-1]
    return next((indent_of(line) for line in [*inside, *after, *before] if line.strip()), "")


def changed_lines(source: str, start: int, end: int, replacements: Sequence[Replacement]) -> str:
    """`source` with the `replacements` made, each re-indented like the lines it replaces; those that give their
    lines' code back as it was are left out. ValueError (a one-line reason) for a line outside `start`..`end`
    (the window shown) and for two replacements of the same line."""
    old = source.split("\n")
    changing: list[tuple[Replacement, list[str]]] = []
    for item in replacements:
        if not start <= item.first <= item.last <= end:
            outside = item.first if not start <= item.first <= end else item.last
            raise ValueError(f"line {outside} is not in the code shown (lines {start}-{end})")
        new = reindented(item.lines, _indent_at(old, item.first, item.last))
        if [line.rstrip() for line in new if line.strip()] != [
                line.rstrip() for line in old[item.first - 1 : item.last] if line.strip()]:
            changing.append((item, new))
    changing.sort(key=lambda pair: pair[0].first)
    for (before, _), (after, _) in pairwise(changing):
        if after.first <= before.last:
            raise ValueError(f"the replacements of lines {before.first}-{before.last} and {after.first}-{after.last} "
                             "overlap: name each line once")
    for item, new in reversed(changing):  # bottom-up: a replacement leaves the line numbers above it as they were
        old[item.first - 1 : item.last] = new
    return "\n".join(old)
