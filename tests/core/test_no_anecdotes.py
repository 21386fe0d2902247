"""The code under `agentflow/` names no example task and no commit: comments and docstrings say why a
mechanism exists in general terms; which task, which commit and which figures motivated it are recorded in
docs/measurements/mechanisms.md, where they can be checked and updated without touching the code.

Task ids come from the two task files: an instance id (`owner__name-3`), its short form (`name-3`, any
number), and the repository's own name where that is not an ordinary word (`inikit`, `toolz`; a repository
called `six` or `parse` is only caught in the forms with a number, so that "six steps" stays allowed).
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CODE = REPO / "agentflow"
TASK_FILES = (REPO / "examples" / "swe-tasks" / "tasks.jsonl", REPO / "examples" / "real-tasks" / "tasks.jsonl")

ORDINARY_WORDS = frozenset({"parse", "six", "inflection", "tabulate", "more_itertools"})
"""Repository names that are also English words (or verbs common in code comments), or packages the code names for
their own sake (more_itertools: a dependency of pytest, which the grading guard protects): only their task ids
and `name-N` forms count."""

HASH = re.compile(r"(?<![\w-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w-])")
"""A commit-like hex string: 7 to 40 hex digits with at least one letter and one digit."""


def _task_ids() -> list[str]:
    ids = []
    for path in TASK_FILES:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                ids.append(json.loads(line)["instance_id"])
    return ids


def _pattern(ids: list[str]) -> re.Pattern[str]:
    """Full ids, `name-N` forms, and the repositories' names that are not ordinary words."""
    names: set[str] = set()
    for instance_id in ids:
        owner, _, rest = instance_id.partition("__")
        name = re.sub(r"-\d+$", "", rest)
        names.update({owner, name, name.replace("-", "_"), name.replace("_", "-")})
    forms = [re.escape(i) for i in ids]
    forms += [re.escape(n) + r"-\d+" for n in names]
    forms += [re.escape(n) for n in names if n.lower() not in ORDINARY_WORDS]
    alternatives = "|".join(sorted(forms, key=len, reverse=True))
    return re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w])", re.IGNORECASE)


def _sources() -> list[Path]:
    return sorted(CODE.rglob("*.py"))


def test_task_files_are_read() -> None:
    ids = _task_ids()
    assert len(ids) >= 30 and all("__" in i for i in ids)
    pattern = _pattern(ids)
    # the forms the check means, and ordinary words it must leave alone
    for hit in ("inikit__inikit-1", "cachette-2", "more-itertools-1", "more-itertools", "toolz's `last`",
                "see six-2", "`tabkit/render.py`", "inikit.errors.ConversionError"):
        assert pattern.search(hit), hit
    for miss in ("an answer of six steps", "parse the header", "tabulate the results", "urllib.parse",
                 "parse_args", "six_figures"):
        assert not pattern.search(miss), miss


def test_no_example_task_is_named_in_the_code() -> None:
    pattern = _pattern(_task_ids())
    found = []
    for path in _sources():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in pattern.finditer(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {match.group(0)!r}")
    assert not found, (
        "example tasks named in the code; say why the mechanism exists in general terms and record the task "
        "in docs/measurements/mechanisms.md:\n" + "\n".join(found))


def _prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and every string that stands alone as a statement (docstrings)."""
    out = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
           if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            out.append((node.lineno, node.value.value))
    return out


def test_no_commit_is_named_in_comments_or_docstrings() -> None:
    found = []
    for path in _sources():
        for number, text in _prose(path.read_text(encoding="utf-8")):
            for match in HASH.finditer(text):
                found.append(f"{path.relative_to(REPO)}:{number}: {match.group(0)!r}")
    assert not found, (
        "commits named in comments or docstrings; record them in docs/measurements/mechanisms.md:\n"
        + "\n".join(found))
