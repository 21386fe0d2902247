"""Normalise outputs so that a vote counts equivalent answers together.

Python code is compared by its AST (`ast.dump`: formatting, comments and quote style do not matter); a
unified diff is compared by the AST of its added code per file; anything else by whitespace-normalised text.
"""

from __future__ import annotations

import ast
import hashlib
import textwrap

from agentflow.pysyntax import parsed


def normalise_python(code: str) -> str | None:
    """`ast.dump` of `code` (dedented), or None when it does not parse."""
    tree = parsed(textwrap.dedent(code))
    return None if tree is None else ast.dump(tree, annotate_fields=False, include_attributes=False)


def whitespace_normalised(text: str) -> str:
    return "\n".join(" ".join(line.split()) for line in text.strip().splitlines() if line.strip())


def diff_additions(diff: str) -> dict[str, str] | None:
    """Added lines of a unified diff, by target file; None if `diff` is not a unified diff."""
    files: dict[str, list[str]] = {}
    current: str | None = None
    seen_hunk = False
    for line in diff.splitlines():
        if line.startswith("+++ "):
            current = line[4:].split("\t")[0].strip().removeprefix("b/")
            files.setdefault(current, [])
        elif line.startswith("@@"):
            seen_hunk = True
        elif current is not None and line.startswith("+"):
            files[current].append(line[1:])
    if not seen_hunk or not files:
        return None
    return {path: "\n".join(lines) for path, lines in files.items()}


def normalise_output(output: str | None, files: dict[str, str] | None = None) -> str:
    """A key equal for equivalent outputs: AST of changed files when known, else of the patch's added code
    or of the output itself, else whitespace-normalised text."""
    if files:
        return _digest("files", _files_key(files))
    if output is None:
        return "none"
    added = diff_additions(output)
    if added is not None:
        return _digest("diff", _files_key(added))
    key = normalise_python(output)
    if key is not None:
        return _digest("ast", key)
    return _digest("text", whitespace_normalised(output))


def _files_key(files: dict[str, str]) -> str:
    """Each file's path and key: the AST of Python code that parses, else whitespace-normalised text."""
    parts = []
    for path in sorted(files):
        key = normalise_python(files[path]) if path.endswith(".py") else None
        parts.append(f"{path}\0{key if key is not None else whitespace_normalised(files[path])}")
    return "\n".join(parts)


def _digest(kind: str, text: str) -> str:
    return f"{kind}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"
