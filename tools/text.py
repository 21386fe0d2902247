"""Pack `text`: search and measure text the model already has (a log, a file's content, a tool's output)."""

from __future__ import annotations

import re

from pydantic import BaseModel

from agentflow.errors import ToolError
from agentflow.tools import tool

_MAX_TEXT = 2_000_000  # Python's re cannot be interrupted; bounding the input bounds the damage


class Match(BaseModel):
    line: int
    """1-based line number where the match starts."""
    column: int
    """1-based column of the match start."""
    match: str
    groups: list[str | None] = []


class SearchResult(BaseModel):
    total: int
    """Number of matches found (may exceed the matches listed)."""
    matches: list[Match]


@tool(timeout=10.0)
def regex_search(
    pattern: str,
    text: str,
    ignore_case: bool = False,
    multiline: bool = True,
    max_matches: int = 50,
) -> SearchResult:
    """Find every match of a Python regular expression in a text, with line and column numbers.

    Args:
        pattern: Python `re` syntax, e.g. r"def (\\w+)\\(" ; capture groups are reported.
        text: The text to search.
        ignore_case: Match letters case-insensitively.
        multiline: Make ^ and $ match at every line start/end.
        max_matches: Stop listing after this many matches (the total is still counted).
    """
    if len(text) > _MAX_TEXT:
        raise ToolError(f"text is longer than {_MAX_TEXT} characters; search a smaller piece")
    flags = (re.IGNORECASE if ignore_case else 0) | (re.MULTILINE if multiline else 0)
    try:
        compiled = re.compile(pattern, flags)
    except re.error as exc:
        raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from None
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    matches: list[Match] = []
    total = 0
    for m in compiled.finditer(text):
        total += 1
        if len(matches) < max(0, max_matches):
            line = _line_of(line_starts, m.start())
            matches.append(
                Match(
                    line=line + 1,
                    column=m.start() - line_starts[line] + 1,
                    match=m.group(0),
                    groups=list(m.groups()),
                )
            )
    return SearchResult(total=total, matches=matches)


def _line_of(starts: list[int], offset: int) -> int:
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid - 1
    return lo


@tool
def text_stats(text: str) -> dict[str, int]:
    """Count the characters, words, lines and non-blank lines of a text.

    Args:
        text: The text to measure.
    """
    lines = text.splitlines()
    return {
        "characters": len(text),
        "words": len(text.split()),
        "lines": len(lines),
        "non_blank_lines": sum(1 for line in lines if line.strip()),
    }


@tool
def extract_lines(text: str, start: int, end: int | None = None, numbered: bool = True) -> str:
    """Return lines start..end (1-based, inclusive) of a text, optionally prefixed with their numbers.

    Args:
        text: The text to cut lines from.
        start: First line to return (1-based).
        end: Last line to return (inclusive); omit for just the start line; -1 for the end of the text.
        numbered: Prefix each line with its number.
    """
    lines = text.splitlines()
    last = len(lines) if end == -1 else (start if end is None else end)
    if start < 1 or last < start:
        raise ToolError(
            f"bad range {start}..{last}: start must be >= 1 and end >= start (the text has {len(lines)} lines)"
        )
    picked = lines[start - 1 : last]
    if not picked:
        return f"(the text has only {len(lines)} lines)"
    width = len(str(start + len(picked) - 1))
    return "\n".join(f"{n:>{width}} | {line}" if numbered else line for n, line in enumerate(picked, start))
