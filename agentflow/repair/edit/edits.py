"""SEARCH/REPLACE edit blocks: the text edit protocol for models without tool calling.

A model answers with blocks like::

    pkg/parser.py
    <<<<<<< SEARCH
            parts = stripped.split("=")
    =======
            parts = stripped.split("=", 1)
    >>>>>>> REPLACE

Small models copy the line-number gutter of the code they were shown (`  31| code`, `*  31| code` on a marked
line) and get indentation slightly wrong, so matching tries, in order: exact text, trailing-whitespace-insensitive
lines, and indentation-insensitive lines (the replacement is re-indented by the same offset).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from agentflow.pysyntax import parsed

_SEARCH = re.compile(r"^\s*<{5,9} ?SEARCH\b.*$")
_DIVIDER = re.compile(r"^\s*={5,9}\s*$")
_REPLACE = re.compile(r"^\s*>{5,9} ?REPLACE\b.*$")
_GUTTER = re.compile(r"^\s*\*?\s*\d+\s?[|:] ?")
_PATH_LINE = re.compile(r"[\w./-]+\.\w+")


@dataclass
class EditBlock:
    path: str | None
    """File the block edits (None when the answer did not name one)."""
    search: str
    replace: str


@dataclass
class ParsedEdits:
    blocks: list[EditBlock]
    problem: str | None = None
    """Why the answer could not be read as edit blocks (None when it could)."""


def _path_from(line: str) -> str | None:
    text = line.strip().strip("`*#:").strip()
    for prefix in ("File:", "file:", "Path:", "path:"):
        text = text.removeprefix(prefix).strip()
    if " " in text or not text:
        return None
    match = _PATH_LINE.fullmatch(text)
    return match.group(0).removeprefix("./").removeprefix("a/").removeprefix("b/") if match else None


def _strip_gutter(lines: list[str]) -> list[str]:
    """Drop copied line numbers, only when every non-blank line carries one."""
    body = [line for line in lines if line.strip()]
    if body and all(_GUTTER.match(line) for line in body):
        return [_GUTTER.sub("", line, count=1) for line in lines]
    return lines


def parse_edits(text: str, *, complete: bool = False) -> ParsedEdits:
    """Read every SEARCH/REPLACE block of a model's answer. With `complete` (the answer ended by itself,
    not at the token cap) a last block without its `>>>>>>> REPLACE` marker ends where the answer ends."""
    lines = text.replace("\r\n", "\n").split("\n")
    blocks: list[EditBlock] = []
    i = 0
    while i < len(lines):
        if not _SEARCH.match(lines[i]):
            i += 1
            continue
        path = None
        for back in range(i - 1, max(-1, i - 4), -1):
            candidate = lines[back].strip()
            if candidate and not candidate.startswith("```"):
                path = _path_from(candidate)
                break
        j = i + 1
        search: list[str] = []
        while j < len(lines) and not _DIVIDER.match(lines[j]):
            if _SEARCH.match(lines[j]) or _REPLACE.match(lines[j]):
                return ParsedEdits(blocks, problem=f"block {len(blocks) + 1}: missing '=======' divider")
            search.append(lines[j])
            j += 1
        if j >= len(lines):
            return ParsedEdits(blocks, problem=f"block {len(blocks) + 1}: missing '=======' divider")
        k = j + 1
        replace: list[str] = []
        while k < len(lines) and not _REPLACE.match(lines[k]):
            replace.append(lines[k])
            k += 1
        if k >= len(lines):
            if not complete:
                return ParsedEdits(
                    blocks, problem=f"block {len(blocks) + 1}: missing '>>>>>>> REPLACE' end marker"
                )
            # the answer ended (not cut by the token cap) right after the replacement: take it as the end
            while replace and (not replace[-1].strip() or replace[-1].strip().startswith("```")):
                replace.pop()
        blocks.append(EditBlock(path, "\n".join(_strip_gutter(search)), "\n".join(_strip_gutter(replace))))
        i = k + 1
    if not blocks:
        return ParsedEdits([], problem="no SEARCH/REPLACE block found")
    return ParsedEdits(blocks)


def indent_of(line: str) -> str:
    """The leading whitespace of a line."""
    return line[: len(line) - len(line.lstrip())]


def _find_lines(haystack: list[str], needle: list[str], key) -> int | None:  # type: ignore[no-untyped-def]
    want = [key(line) for line in needle]
    for start in range(len(haystack) - len(needle) + 1):
        if all(key(haystack[start + n]) == want[n] for n in range(len(needle))):
            return start
    return None


def apply_edit(content: str, search: str, replace: str) -> str:
    """`content` with the first match of `search` replaced; raises ValueError when it does not match."""
    if not search.strip():
        raise ValueError("the SEARCH part is empty")
    if search in content:
        return content.replace(search, replace, 1)
    lines = content.split("\n")
    needle = search.split("\n")
    while needle and not needle[-1].strip():
        needle.pop()
    while needle and not needle[0].strip():
        needle.pop(0)
    new = replace.split("\n")
    while new and not new[-1].strip():
        new.pop()
    start = _find_lines(lines, needle, lambda s: s.rstrip())
    if start is None:
        start = _find_lines(lines, needle, lambda s: s.strip())
        if start is None:
            raise ValueError(
                "the SEARCH lines do not match the file (copy them exactly, without line numbers)"
            )
        have, given = indent_of(lines[start]), indent_of(needle[0])
        if len(have) >= len(given):
            extra = have[len(given) :]
            new = [extra + line if line.strip() else line for line in new]
        else:
            cut = len(given) - len(have)
            new = [line[cut:] if line[:cut].strip() == "" else line.lstrip() for line in new]
    return "\n".join(lines[:start] + new + lines[start + len(needle) :])


def edit_parts(before: Mapping[str, str], after: Mapping[str, str], *, limit: int) -> list[dict[str, str]]:
    """Each change of an edit on its own: for every run of changed lines (a difflib opcode group) across the
    edited files, the files with only that run applied. Empty when the edit makes fewer than two changes or
    more than `limit`; a part whose Python file no longer parses is left out. Small models often fix the
    bug and, beside it, change a signature or a line they were not asked to (the rest of the edit fails)."""
    old = {path: before.get(path, "").split("\n") for path in after}
    changes: list[tuple[str, int, int, list[str]]] = []  # (path, first old line, end old line, new lines)
    for path, new in after.items():
        new_lines = new.split("\n")
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old[path], new_lines, autojunk=False).get_opcodes():
            if tag != "equal":
                changes.append((path, i1, i2, new_lines[j1:j2]))
    if not 2 <= len(changes) <= limit:
        return []
    parts: list[dict[str, str]] = []
    for path, i1, i2, lines in changes:
        content = "\n".join(old[path][:i1] + lines + old[path][i2:])
        if path.endswith(".py") and parsed(content) is None:
            continue
        parts.append({path: content})
    return parts
