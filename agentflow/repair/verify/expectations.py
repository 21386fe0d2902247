"""A reproduction script built from the issue's own examples and what the issue says they should give.

Bug reports often show an interactive session (`>>> f(x)` and the wrong value it printed) and say in words
what they expected. A free-form reproduction script asks a small model to get the package's API, a way to
fail and the issue's values right at once, and it often gets one of them wrong. Here the statements are the
issue's own (run as they are, the names they use but never import imported as the examples' tracer does);
the model is asked only what each example should give once the bug is fixed — it writes the examples back as
a doctest of the fixed code: a Python literal under each, or the error it should raise, leaving out those the
issue says nothing about — and the script that checks those values is written by code. It is
then kept or refused like any reproduction (`Workbench.install_repro`: it must fail at the base commit the way
the issue reports).

No model call here: `steps.write_expectations` asks; this module reads the examples, the answer and writes
the script.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentflow.pysyntax import parsed
from agentflow.repair.locate.statement import DOCTEST_LINE

MAX_LITERAL_CHARS = 1000
"""An expected value longer than this is not checked (the prompt shows each example's output cut to size)."""


@dataclass(frozen=True)
class TracedExample:
    """One statement of the issue's examples, as the examples' tracer ran it."""

    number: int
    """Its position among the issue's statements, from 1 (an expectation's key)."""
    source: str
    shown: str
    """What it showed on the unchanged code (printed, echoed or raised; `_tracer.py`)."""


@dataclass(frozen=True)
class Expectation:
    """What an example should give once the bug is fixed: a literal value, or an exception raised."""

    literal: str | None = None
    """Source of a Python literal the last line's value must equal."""
    raises: str | None = None
    """Name of the exception it must raise (its class's name, as a traceback's last line says it)."""


_RAISED = re.compile(r"^\s*(?:raises?\s+)?`?([A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Interrupt))`?\b")


def doctest_source(source: str) -> str:
    """`source` as a doctest writes it: `>>> ` before its first line, `... ` before the others."""
    first, *rest = source.rstrip("\n").split("\n")
    return "\n".join([f">>> {first}", *(f"... {line}" for line in rest)])


def checkable(statements: Sequence[str], shown: Sequence[str]) -> list[TracedExample]:
    """The examples whose value can be checked: the last line is an expression that is not a `print` call (a
    printed table is no literal). Numbered from 1 in the order of `statements`."""
    out: list[TracedExample] = []
    for i, source in enumerate(statements):
        last = _last_expression(source)
        if last is None or _is_print(last):
            continue
        out.append(TracedExample(i + 1, source, shown[i].strip() if i < len(shown) else ""))
    return out


def _last_expression(source: str) -> ast.expr | None:
    tree = parsed(source)
    tail = tree.body[-1] if tree is not None and tree.body else None
    return tail.value if isinstance(tail, ast.Expr) else None


def _is_print(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"


def read_expectations(answer: str, examples: Sequence[TracedExample]) -> dict[int, Expectation]:
    """Per example number, what the answer (the examples as a doctest of the fixed code) says it should give:
    the output under an example's `>>>` lines, read as a Python literal, or a traceback's (or `raises`) error
    name. An example is found by its code (quotes and spacing aside). Output that is neither (words, a repr)
    says nothing; nor does a value equal to what the example showed on the unchanged code (no check then
    fails where the bug is)."""
    # an example of several statements (a code block run as one) is also found by its last line, which the
    # answer may give as a `>>>` of its own after the others
    by_code = {_code_key(_last_line(e.source)): e for e in examples}
    by_code.update({_code_key(e.source): e for e in examples})
    found: dict[int, Expectation] = {}
    for source, output in _doctest_parts(answer):
        example = by_code.get(_code_key(source))
        if example is None or example.number in found or not output:
            continue
        expected = _expectation(output, example.shown)
        if expected is not None:
            found[example.number] = expected
    return found


def _doctest_parts(answer: str) -> list[tuple[str, str]]:
    """(source, output) of each `>>>` example of a doctest text."""
    parts: list[tuple[list[str], list[str]]] = []
    for line in answer.splitlines():
        m = DOCTEST_LINE.match(line)
        if m is not None and m.group(1) == ">>>":
            parts.append(([m.group(2)], []))
        elif m is not None and parts and not parts[-1][1]:
            parts[-1][0].append(m.group(2))  # a continuation line (after output: a traceback's `...`)
        elif parts and line.strip():
            parts[-1][1].append(line.strip())
        elif parts and parts[-1][1]:
            parts.append(([], []))  # a blank line ends the output
    return [("\n".join(src), "\n".join(out)) for src, out in parts if src]


def _last_line(source: str) -> str:
    tree = ast.parse(source)
    return _segment(source, tree.body[-1]) if tree.body else source


def _code_key(source: str) -> str:
    tree = parsed(source.strip())
    return ast.dump(tree) if tree is not None else " ".join(source.split())


def _expectation(output: str, shown: str) -> Expectation | None:
    lines = output.splitlines()
    if lines[0].startswith("Traceback") or _RAISED.match(lines[-1]):
        m = _RAISED.match(lines[-1])
        name = m.group(1).rsplit(".", 1)[-1] if m else None
        return Expectation(raises=name) if name and not shown.startswith(f"raised {name}") else None
    literal = _literal(output.strip())
    return Expectation(literal=literal) if literal is not None and not _same_as_shown(literal, shown) else None


def _literal(text: str) -> str | None:
    if not text or len(text) > MAX_LITERAL_CHARS:
        return None
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return text


def _same_as_shown(literal: str, shown: str) -> bool:
    try:
        return bool(ast.literal_eval(literal) == ast.literal_eval(shown))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return literal.strip() == shown.strip()


def expectation_script(statements: Sequence[str], imports: Mapping[str, str],
                       expectations: Mapping[int, Expectation]) -> str | None:
    """A script that runs the examples in order and asserts, for each example with an expectation, that it
    gives it; every mismatch is listed in one AssertionError (what the example gave, what the issue expects).
    Examples shown only for their output run inside `try` (a display that raises stops no check); the
    statements that set up state run as they are. None when there is nothing to check. `imports` maps a name
    the examples use without importing it to the module defining it (`spectrum.names_to_import`)."""
    if not expectations:
        return None
    lines = [f"from {module} import {name}" for name, module in sorted(imports.items())]
    lines += ["", "_mismatches = []", ""]
    for i, source in enumerate(statements):
        number = i + 1
        tree = ast.parse(source)
        tail = tree.body[-1] if tree.body else None
        if not isinstance(tail, ast.Expr):
            lines += [source, ""]
            continue
        # the issue's own text (its quotes and spacing: a reproduction must use the values the issue shows)
        lines += [_segment(source, node) for node in tree.body[:-1]]
        expression = f"({_segment(source, tail.value)})"  # in brackets: its own line breaks need no indent
        expected = expectations.get(number)
        if expected is None:
            lines += ["try:", f"    {expression}", "except Exception:", "    pass", ""]
        else:
            lines += _check(expression, expected)
    lines.append('assert not _mismatches, "\\n".join(_mismatches)')
    return "\n".join(lines) + "\n"


def _segment(source: str, node: ast.AST) -> str:
    return ast.get_source_segment(source, node) or ast.unparse(node)


def _check(expression: str, expected: Expectation) -> list[str]:
    said = repr(expression[1:-1])  # as the issue wrote it, without the brackets around it
    run = ["try:", f"    _got = {expression}", "except Exception as _error:"]
    if expected.raises is not None:
        name = repr(expected.raises)
        return [*run,
                f"    if type(_error).__name__ != {name}:",
                (f"        _mismatches.append('%s raised %s: %s; the issue expects %s raised' % ({said}, "
                 f"type(_error).__name__, _error, {name}))"),
                "else:",
                f"    _mismatches.append('%s gives %r; the issue expects %s raised' % ({said}, _got, {name}))",
                ""]
    literal = expected.literal or "None"
    return [*run,
            (f"    _mismatches.append('%s raised %s: %s; the issue expects %s' % ({said}, type(_error).__name__, "
             f"_error, {literal!r}))"),
            "else:",
            f"    if not (_got == ({literal})):",
            f"        _mismatches.append('%s gives %r; the issue expects %s' % ({said}, _got, {literal!r}))",
            ""]
