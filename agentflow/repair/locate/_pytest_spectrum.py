"""A pytest plugin recording which repository functions each test calls: written into the task's sandbox and
loaded there by `agentflow.repair.locate.spectrum` (`-p agentflow_spectrum`; never imported on the host). Standard
library only.

At the end of the session it writes, to the file named by `AGENTFLOW_SPECTRUM_OUT`, a JSON object: `tests`
{passed, failed}, `ids` (the node ids of the tests that passed or failed, in the order they ran), `failed_ids`
(indexes into `ids`) and `functions` [[file relative to the working directory, first line, passed tests that
called it, failed tests that called it, indexes into `ids` of the tests that called it]] -- the program
spectrum fault localization reads, and which tests reach which function (a candidate's tests start with those).
Past MAX_IDS tests the ids are no longer recorded (`ids` is then null): the counts stay whole.

With `AGENTFLOW_SPECTRUM_LINES` naming a JSON file `{"functions": [[file, first line, last line], ...]}` it also
records which lines of those functions each test ran (a line spectrum, `agentflow.repair.locate.lines`): the
object gets `lines` [[file, line, passed tests that ran it, failed tests that ran it]]. Line events are asked
for only in frames of code that starts inside one of those functions: the rest runs with call events alone.
"""

from __future__ import annotations

import json
import os
import sys
from types import CodeType, FrameType
from typing import Any

_ROOT = os.path.realpath(os.getcwd()) + os.sep
_PYTEST_DIR = os.sep + "_pytest" + os.sep
_files: dict[str, str | None] = {}
_called: set[tuple[str, int]] = set()
_outcome: dict[str, str] = {}
_counts: dict[tuple[str, int], list[int]] = {}
_tests = {"passed": 0, "failed": 0}
_ids: list[str] = []
_failed_ids: list[int] = []
_reach: dict[tuple[str, int], list[int]] = {}
MAX_IDS = 20000
MAX_LINE_FUNCTIONS = 50
_targets: dict[str, list[tuple[int, int]]] = {}
_target_code: dict[CodeType, str | None] = {}
_ran: set[tuple[str, int]] = set()
_line_counts: dict[tuple[str, int], list[int]] = {}


def _read_targets() -> None:
    spec = os.environ.get("AGENTFLOW_SPECTRUM_LINES")
    if not spec:
        return
    try:
        with open(spec) as f:
            rows = json.load(f)["functions"][:MAX_LINE_FUNCTIONS]
        for path, first, last in rows:
            _targets.setdefault(str(path), []).append((int(first), int(last)))
    except Exception:  # no line spectrum; the calls are still recorded
        _targets.clear()
        sys.stderr.write("agentflow_spectrum: could not read " + spec + "\n")


def _relative(filename: str) -> str | None:
    if filename not in _files:
        real = os.path.realpath(filename) if not filename.startswith("<") else ""
        inside = real.startswith(_ROOT) and "site-packages" not in real
        _files[filename] = real[len(_ROOT):] if inside else None
    return _files[filename]


def _tracer(frame: FrameType, event: str, arg: Any) -> Any:
    code = frame.f_code
    if code.co_name != "<module>":
        rel = _relative(code.co_filename)
        if rel is not None and not _by_pytest(frame.f_back):
            _called.add((rel, code.co_firstlineno))
            if _targets and _in_target(code, rel) is not None:
                return _line_tracer
    return None  # calls only, no line events


def _in_target(code: CodeType, rel: str) -> str | None:
    """`rel` when the code object starts inside a target function (its body, its lambdas and comprehensions)."""
    if code not in _target_code:
        spans = _targets.get(rel, [])
        inside = any(first <= code.co_firstlineno <= last for first, last in spans)
        _target_code[code] = rel if inside else None
    return _target_code[code]


def _line_tracer(frame: FrameType, event: str, arg: Any) -> Any:
    if event == "line":
        rel = _target_code.get(frame.f_code)
        if rel is not None:
            _ran.add((rel, frame.f_lineno))
    return _line_tracer


def _by_pytest(caller: FrameType | None) -> bool:
    # pytest's own calls into the code under test are not the test's: the `repr()` of the objects in a failed
    # assertion's message would make `__repr__` the most suspicious method of every class a failing test uses
    return caller is not None and _PYTEST_DIR in caller.f_code.co_filename


def pytest_configure(config: Any) -> None:
    _read_targets()


def pytest_runtest_setup(item: Any) -> None:
    _called.clear()
    _ran.clear()
    sys.settrace(_tracer)


def pytest_runtest_teardown(item: Any, nextitem: Any) -> None:
    sys.settrace(None)


def pytest_runtest_logreport(report: Any) -> None:
    if report.failed:
        _outcome[report.nodeid] = "failed"
    elif report.when == "call":
        _outcome.setdefault(report.nodeid, report.outcome)
    if report.when == "teardown":
        outcome = _outcome.pop(report.nodeid, "skipped")
        if outcome in _tests:
            _tests[outcome] += 1
            column = 0 if outcome == "passed" else 1
            index = len(_ids)
            if index < MAX_IDS:
                _ids.append(report.nodeid)
                if column:
                    _failed_ids.append(index)
            for key in _called:
                _counts.setdefault(key, [0, 0])[column] += 1
                if index < MAX_IDS:
                    _reach.setdefault(key, []).append(index)
            for line in _ran:
                _line_counts.setdefault(line, [0, 0])[column] += 1
        _called.clear()
        _ran.clear()


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    sys.settrace(None)
    target = os.environ.get("AGENTFLOW_SPECTRUM_OUT")
    if not target:
        return
    complete = _tests["passed"] + _tests["failed"] <= MAX_IDS
    rows = [[path, line, passed, failed, _reach.get((path, line), []) if complete else []]
            for (path, line), (passed, failed) in _counts.items()]
    report: dict[str, Any] = {"tests": _tests, "ids": _ids if complete else None, "failed_ids": _failed_ids,
                              "functions": rows}
    if _targets:
        report["lines"] = [[path, line, passed, failed] for (path, line), (passed, failed) in _line_counts.items()]
    try:
        with open(target, "w") as f:
            json.dump(report, f)
    except Exception:  # the suite's own result stands; the host reads no spectrum
        sys.stderr.write("agentflow_spectrum: could not write " + target + "\n")
