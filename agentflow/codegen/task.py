"""The code-generation task kind: a function to write from its prompt, graded by hidden tests.

A workflow sees only `prompt` (the signature and docstring, with its examples) and `entry_point`; the
examples it may test against are parsed from the prompt (`examples`). `tests` (a `check(candidate)`
function, as HumanEval ships it) only grades.
"""

from __future__ import annotations

import ast
import re

from pydantic import BaseModel, Field


class Example(BaseModel):
    """One input/output example read from the prompt."""

    call: str
    """A call of the entry point, e.g. `add(1, 2)`."""
    expected: str
    """The expected value as a Python expression, e.g. `3`."""


class CodeTask(BaseModel):
    """One function to write."""

    task_id: str = "task"
    prompt: str
    """Signature and docstring (what the model sees)."""
    entry_point: str
    """The function's name."""
    tests: str = ""
    """Hidden grading code defining `check(candidate)`; never shown to a workflow."""
    examples: list[Example] = Field(default_factory=list)
    """Examples parsed from the prompt (the only tests a workflow may run)."""


def _parses(expr: str) -> bool:
    try:
        ast.parse(expr, mode="eval")
    except SyntaxError:
        return False
    return True


def _call_at(text: str, start: int) -> str | None:
    """The call that starts at `start`: the shortest text from there to a `)` that parses as an expression."""
    ends = (i + 1 for i in range(start, len(text)) if text[i] == ")")
    return next((text[start:end] for end in ends if _parses(text[start:end])), None)


_ARROWS = ("==>", "=>", "➞", "->", "==", "should return", "returns", "would return", "=")


def _expected_after(rest: str) -> str | None:
    rest = rest.strip()
    for arrow in _ARROWS:
        if rest.startswith(arrow):
            value = rest[len(arrow):].strip().rstrip(".,;")
            return value if value and _parses(value) else None
    return None


def parse_examples(prompt: str, entry_point: str) -> list[Example]:
    """Examples of `entry_point` in the docstring: doctest lines (`>>> f(x)` then the value) and
    `f(x) == y` / `f(x) ➞ y` / `f(x) => y` / `f(x) -> y` / `f(x) should return y` lines. Each call and value
    must parse as a Python expression (nothing is evaluated here)."""
    lines = prompt.splitlines()
    found: list[Example] = []
    pattern = re.compile(rf"\b{re.escape(entry_point)}\s*\(")
    for i, line in enumerate(lines):
        for match in pattern.finditer(line):
            call = _call_at(line, match.start())
            if call is None or line[:match.start()].rstrip().endswith("def"):
                continue
            end = match.start() + len(call)
            expected = _expected_after(line[end:])
            if expected is None and line.lstrip().startswith(">>>"):
                value = lines[i + 1].strip() if i + 1 < len(lines) else ""
                expected = value if value and not value.startswith(">>>") and _parses(value) else None
            if expected is not None and all(e.call != call for e in found):
                found.append(Example(call=call, expected=expected))
    return found + [e for e in _input_output_examples(lines, entry_point) if all(f.call != e.call for f in found)]


def _input_output_examples(lines: list[str], entry_point: str) -> list[Example]:
    """`Input: x` followed (within two lines) by `Output: y` blocks."""
    found = []
    for i, line in enumerate(lines):
        match = re.match(r"\s*Input\s*:\s*(.+?)\s*$", line)
        if not match:
            continue
        for after in lines[i + 1:i + 3]:
            out = re.match(r"\s*Output\s*:\s*(.+?)\s*$", after)
            if out:
                call, expected = f"{entry_point}({match.group(1)})", out.group(1).rstrip(".")
                if _parses(call) and _parses(expected):
                    found.append(Example(call=call, expected=expected))
                break
    return found


def make_task(prompt: str, entry_point: str | None = None, *, task_id: str = "task", tests: str = "") -> CodeTask:
    """A task from a prompt; the entry point defaults to the last function the prompt defines."""
    if entry_point is None:
        names = re.findall(r"^def\s+([A-Za-z_]\w*)\s*\(", prompt, re.MULTILINE)
        if not names:
            raise ValueError("the prompt defines no function: give entry_point")
        entry_point = names[-1]
    return CodeTask(task_id=task_id, prompt=prompt, entry_point=entry_point, tests=tests,
                    examples=parse_examples(prompt, entry_point))


def program(prompt: str, code: str, entry_point: str) -> str:
    """The module a candidate is run as: the prompt (its imports and helpers; a docstring-only function is a
    valid definition), then the answer, which redefines the entry point. An answer without a `def` of the
    entry point is taken as its body and appended to the prompt."""
    if re.search(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE):
        return prompt.rstrip() + "\n\n\n" + code.strip("\n") + "\n"
    body = code if code.startswith((" ", "\t")) else "\n".join("    " + ln for ln in code.splitlines())
    return prompt.rstrip("\n") + "\n" + body + "\n"


__all__ = ["CodeTask", "Example", "make_task", "parse_examples", "program"]
