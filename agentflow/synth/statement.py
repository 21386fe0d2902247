"""Problem statements for synthesized tasks, written from what the failing tests show.

A failing-test report (the test's code and pytest's output, as CI prints it) or, where the failing line
asserts a call's result, a behaviour report ("`f(x)` gives 3, expected 2"), both from the test files' frames
only. Every statement leaves through `scrub`, which drops each line naming the changed file or lines (and
masks memory addresses); `check_statement` proves the result names none of them.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from agentflow.pysyntax import parsed
from agentflow.synth.hide import definition_span, test_definition

_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")
_FRAME = re.compile(r"^(\S+\.py):\d+: in \S+")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")
_MAX_CODE_LINES = 40
_MAX_OUTPUT_LINES = 30


@dataclass(frozen=True)
class Failure:
    """What pytest showed for one failing test, the package's own frames removed."""

    test_id: str
    frames: list[str]
    """Lines of the test files' frames (`path:line: in name`, the source lines, `E` lines)."""
    failing_line: str
    """The test's source line where it failed (the last test-file frame's code line), or ""."""
    error: list[str]
    """The `E` lines (the assertion or exception output)."""


def failure_sections(output: str) -> dict[str, list[str]]:
    """pytest's FAILURES/ERRORS sections by title (`test_name`, `TestClass.test_name[param]`)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in output.splitlines():
        match = _SECTION.match(line)
        if match:
            current = sections.setdefault(match.group(1), [])
            continue
        if line.startswith(("=====", "----- Captured")):
            current = None
        elif current is not None:
            current.append(line)
    return sections


def read_failure(test_id: str, output: str, test_paths: set[str]) -> Failure | None:
    """The test-file frames of `test_id`'s failure in `output` (`--tb=short`), or None if it is not there."""
    # pytest titles a test's failure section with its id after the file, `::` as `.`
    title = test_id.split("::", 1)[1].replace("::", ".") if "::" in test_id else test_id
    lines = failure_sections(output).get(title)
    if lines is None:
        return None
    frames: list[str] = []
    keep, failing, error = True, "", []
    for line in lines:
        frame = _FRAME.match(line)
        if frame:
            keep = frame.group(1) in test_paths
        if line.startswith("E "):
            error.append(line)
            frames.append(line)
        elif keep:
            frames.append(line)
            if line.startswith("    ") and not frame:
                failing = line.strip()
    return Failure(test_id, frames[:_MAX_OUTPUT_LINES], failing, error[:_MAX_OUTPUT_LINES])


def failing_test_code(text: str, test_id: str) -> str:
    """The source of the test function `test_id` names, in the test file's `text` ("" if not found)."""
    node = test_definition(text, test_id)
    if node is None:
        return ""
    start, end = definition_span(node)
    lines = text.splitlines()[start - 1 : end]
    indent = min((len(x) - len(x.lstrip()) for x in lines if x.strip()), default=0)
    body = [x[indent:] for x in lines]
    if len(body) > _MAX_CODE_LINES:
        body = body[:_MAX_CODE_LINES] + ["    ..."]
    return "\n".join(body)


def failing_test_report(failures: list[Failure], code: str, failing_ids: list[str]) -> str:
    """The failing-test report: which tests fail, the first one's code and pytest's output for it."""
    first = failures[0]
    listed = "\n".join(f"- `{t}`" for t in failing_ids[:8]) + ("\n- ..." if len(failing_ids) > 8 else "")
    parts = [
        f"`{first.test_id}` fails" + (f" (and {len(failing_ids) - 1} more)" if len(failing_ids) > 1 else ""),
        "",
        "CI fails on the current code. Failing tests:",
        "",
        listed,
        "",
        f"The output for `{first.test_id}`:",
        "",
        "```",
        *first.frames,
        "```",
    ]
    if code:
        parts += ["", "The test:", "", "```python", code, "```"]
    parts += ["", "The tests are right; the library is wrong. Fix the library so that they pass."]
    return "\n".join(parts) + "\n"


def behaviour_report(failure: Failure, *, cite_test: bool = True) -> str | None:
    """"`expr` gives X, expected Y" when the failing line is `assert <expr> == <expected>` and pytest showed
    the value (naming the test it comes from when `cite_test`); None when that cannot be derived."""
    tree = parsed(failure.failing_line)
    if tree is None:
        return None
    if not tree.body or not isinstance(tree.body[0], ast.Assert):
        return None
    test = tree.body[0].test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return None
    got = _shown_value(failure.error)
    if got is None:
        return None
    expr, expected = ast.unparse(test.left), ast.unparse(test.comparators[0])
    if not any(isinstance(n, ast.Call) for n in ast.walk(test.left)):
        expr, expected = expected, expr  # `assert expected == f(x)`
        if not any(isinstance(n, ast.Call) for n in ast.walk(test.comparators[0])):
            return None
    source = f" (from `{failure.test_id}`)" if cite_test else ""
    return (
        f"Wrong result from `{_short(expr)}`\n\n"
        f"`{expr}` gives `{got}`, but it should equal `{expected}`{source}.\n"
    )


_ANY_FRAME = re.compile(r"^(\S+|<[^>]+>):\d+: in \S+")


def user_report(failure: Failure, snippet: str, others: int) -> str:
    """A user's report of a hidden test's failure: its statements as the user's snippet and what running them
    printed (source and `E` lines; no `path:line: in name` frame line, no `???` of frozen modules), no test named."""
    shown = [line for line in failure.frames if not _ANY_FRAME.match(line) and line.strip() != "???"]
    said = failure.error[0][1:].strip() if failure.error else ""
    title = f"Unexpected `{_short(said)}`" if said else "Unexpected failure"
    code = (snippet or failure.failing_line).splitlines()
    if len(code) > _MAX_CODE_LINES:
        code = code[:_MAX_CODE_LINES] + ["..."]
    parts = [title, "", "Running this:", "", "```python", *code, "```", "", "fails with:", "", "```", *shown, "```", ""]
    if others:
        parts += ["A few similar cases go wrong as well.", ""]
    parts.append("I expected it to work.")
    return "\n".join(parts) + "\n"


def _shown_value(error: list[str]) -> str | None:
    """The left value of pytest's first `E       assert A == B` line."""
    for line in error:
        text = line[1:].strip().removeprefix("AssertionError: ")
        if text.startswith("assert ") and " == " in text:
            return text.removeprefix("assert ").split(" == ", 1)[0].strip()
    return None


def _short(expr: str) -> str:
    return expr if len(expr) <= 60 else expr[:57] + "..."


_PATH = re.compile(r"[\w./-]+\.py")


def _naming(forbidden: list[str]) -> list[re.Pattern[str]]:
    """How each forbidden text is named: a file path only as a whole path, so `mod.py` is named by
    `/abs/mod.py:12` but not by the test file `tests/test_mod.py` (whose ids a failing-test report must keep);
    any other text (a changed line) wherever it appears."""
    needles = [f for f in (x.strip() for x in forbidden) if f]
    return [re.compile(rf"(?<![\w.-]){re.escape(n)}(?!\w)" if _PATH.fullmatch(n) else re.escape(n)) for n in needles]


def scrub(text: str, forbidden: list[str]) -> str:
    """`text` without the lines naming any forbidden text (memory addresses replaced)."""
    naming = _naming(forbidden)
    kept = [line for line in text.split("\n") if not any(n.search(line) for n in naming)]
    return _ADDRESS.sub("0x...", "\n".join(kept))


def check_statement(text: str, forbidden: list[str]) -> bool:
    """True when the statement names none of the forbidden texts."""
    return not any(n.search(text) for n in _naming(forbidden))
