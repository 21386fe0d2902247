"""Runs a bug report's example code under a call tracer: written into the task's sandbox and run there by
`agentflow.repair.locate.spectrum` (never imported on the host). Standard library only; works on Python 3.8+.

    python3 _tracer.py SPEC.json

SPEC holds `statements` (run one after another in one namespace; one that raises is reported and the next
still runs, as in a doctest) and `names` (a top-level name the examples use without importing it -> the
module that defines it, imported first). It prints, as its last line, `MARKER` and a JSON object:
`calls` [[file relative to the working directory, qualified name, first line, order of first call, calls]]
for code under the working directory that the
statements call (not what runs while a module is imported), `errors` (the traceback of each statement that raised)
and `shown` (per statement, what a reader of the report would see: what it printed, the value of its last line
when that is an expression, as an interactive session shows it, and the type and message of what it raised --
no traceback, whose line numbers move with any edit).
With `lines` in SPEC ([[file, first line, last line]] of some functions) the object also has `lines`
[[file, line]]: the lines of those functions the statements ran (line events only in their frames).
"""

from __future__ import annotations

import ast
import importlib
import io
import json
import os
import sys
import traceback
from types import CodeType, FrameType
from typing import Any

MARKER = "AGENTFLOW_TRACE "
MAX_CALLS = 2000
MAX_ERROR_CHARS = 3000
MAX_SHOWN_CHARS = 2000
MAX_LINE_FUNCTIONS = 50


def compiled(statement: str) -> tuple[CodeType, CodeType | None]:
    """(code of the statement, code of its last line's expression or None): the value an interactive session
    would echo (`"alice" in cache` after the lines that set the cache up)."""
    tree = ast.parse(statement, "<issue>")
    last = None
    tail = tree.body[-1] if tree.body else None
    if isinstance(tail, ast.Expr):
        tree.body.pop()
        last = ast.Expression(tail.value)
    return compile(tree, "<issue>", "exec"), (compile(last, "<issue>", "eval") if last is not None else None)


def run_statement(statement: str, namespace: dict[str, Any]) -> tuple[str, str | None]:
    """Run one statement; (what it showed, its traceback or None)."""
    out, real = io.StringIO(), sys.stdout
    sys.stdout = out
    error: str | None = None
    try:
        body, last = compiled(statement)
        exec(body, namespace)
        if last is not None:
            value = eval(last, namespace)
            if value is not None:
                trace = sys.gettrace()
                sys.settrace(None)  # the echo's own `__repr__` is no call of the report's
                try:
                    out.write(repr(value) + "\n")
                finally:
                    sys.settrace(trace)
    except BaseException as exc:
        error = traceback.format_exc()[-MAX_ERROR_CHARS:]
        try:
            message = str(exc)
        except Exception:  # an exception whose own __str__ fails still says its type
            message = "?"
        out.write(f"raised {type(exc).__name__}: {message}\n")
    finally:
        sys.stdout = real
    return out.getvalue()[-MAX_SHOWN_CHARS:], error


def main(spec_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    root = os.path.realpath(os.getcwd()) + os.sep
    own = os.path.realpath(os.path.dirname(os.path.abspath(__file__))) + os.sep
    calls: dict[tuple[str, str, int], list[int]] = {}
    files: dict[str, str | None] = {}
    targets: dict[str, list[tuple[int, int]]] = {}
    for path, first, last in spec.get("lines", [])[:MAX_LINE_FUNCTIONS]:
        targets.setdefault(str(path), []).append((int(first), int(last)))
    ran: set[tuple[str, int]] = set()

    def relative(filename: str) -> str | None:
        if filename not in files:
            real = os.path.realpath(filename) if not filename.startswith("<") else ""
            inside = real.startswith(root) and not real.startswith(own) and "site-packages" not in real
            files[filename] = real[len(root):] if inside else None
        return files[filename]

    def importing(frame: FrameType) -> bool:
        # a call made while a module body runs (an import, eager or lazy) is not the example's own: the
        # nearest module-level frame up the stack tells which
        caller = frame.f_back
        while caller is not None:
            if caller.f_code.co_name == "<module>":
                return caller.f_code.co_filename != "<issue>"
            caller = caller.f_back
        return True

    def line_tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            rel = relative(frame.f_code.co_filename)
            if rel is not None:
                ran.add((rel, frame.f_lineno))
        return line_tracer

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        rel = relative(code.co_filename)
        if rel is not None and code.co_name != "<module>" and not importing(frame):
            key = (rel, getattr(code, "co_qualname", code.co_name), code.co_firstlineno)
            seen = calls.get(key)
            if seen is not None:
                seen[1] += 1
            elif len(calls) < MAX_CALLS:
                calls[key] = [len(calls), 1]
            if any(first <= code.co_firstlineno <= last for first, last in targets.get(rel, [])):
                return line_tracer  # line events only inside the functions asked for
        return None  # calls only, so the examples run at close to full speed

    namespace: dict[str, Any] = {"__name__": "__main__"}
    errors: list[str] = []
    shown: list[str] = []
    sys.settrace(tracer)
    try:
        for name, module in sorted(spec.get("names", {}).items()):
            try:
                namespace[name] = getattr(importlib.import_module(module), name)
            except Exception:  # a name the examples only mention: they will say NameError themselves
                pass
        for statement in spec.get("statements", []):
            text, error = run_statement(statement, namespace)
            shown.append(text)
            if error is not None:
                errors.append(error)
    finally:
        sys.settrace(None)
    rows = [[rel, qualname, line, order, count] for (rel, qualname, line), (order, count) in calls.items()]
    sys.stdout.flush()
    report: dict[str, Any] = {"calls": rows, "errors": errors, "shown": shown}
    if targets:
        report["lines"] = sorted([rel, line] for rel, line in ran)
    sys.stdout.write("\n" + MARKER + json.dumps(report) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
