"""Localization by running code (spectrum-based fault localization, as AutoCodeRover uses it): which repository
functions the failing runs reach, and how rarely the passing ones do.

* The report's examples (`statement.read_statement`), run under a call tracer (`_tracer.py`), are a failing run:
  they name the functions the fault must lie on, helpers the report never names included. What they raise is
  recorded, not ranked on: a report shows the exceptions a fix keeps as often as the one it removes.
* The repository's test suite, run with a pytest plugin (`_pytest_spectrum.py`), says which functions each passing
  and each failing test called.
* A function's Ochiai suspiciousness is ef / sqrt(F * (ef + ep)): F failing runs, ef of them reached it, ep passing
  tests did; `localize.rank_windows` weighs its word scores with it (`RunEvidence`).

Nothing the sandbox writes is trusted: reports are read as data, sizes bounded, and a row is kept only when it
names a line inside a function of the repository's own non-test sources.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentflow.errors import SandboxError
from agentflow.pysyntax import parsed
from agentflow.repair.locate.localize import RunEvidence, symbols
from agentflow.repair.locate.statement import read_statement
from agentflow.sandbox.base import Sandbox, sh_command
from agentflow.swe.patch import is_test_path
from agentflow.swe.testrun import (
    STOPPED_LINE,
    install_runner,
    runner_command,
    stop_env,
    test_env,
)
from agentflow.swe.workspace import EVAL_DIR

TRACE_DIR = f"{EVAL_DIR}/spectrum"
"""Where the tracer, the plugin and their reports live (the git-excluded scratch folder)."""
_TRACER = Path(__file__).with_name("_tracer.py")
_SPECTRUM = Path(__file__).with_name("_pytest_spectrum.py")
MARKER = "AGENTFLOW_TRACE "
"""The tracer's last line starts with it (`_tracer.MARKER`)."""
MAX_SHOWN_CHARS = 2000
"""Of what one statement showed, the end is kept (the tracer cuts at the same size, `_tracer.MAX_SHOWN_CHARS`)."""
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
"""An object's default repr names its address, which differs from run to run."""
MAX_REPORT_CHARS = 4_000_000
"""A report larger than this is not read (a suite of thousands of tests writes well under 1 MB)."""


def module_of(path: str) -> str | None:
    """The import name of a repository file (`pkg/sub/mod.py` -> `pkg.sub.mod`, `pkg/__init__.py` -> `pkg`)."""
    if not path.endswith(".py"):
        return None
    parts = path[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if parts and parts[0] == "src":  # the src layout
        parts = parts[1:]
    return ".".join(parts) if parts and all(p.isidentifier() for p in parts) else None


def names_to_import(statements: list[str], sources: Mapping[str, str]) -> dict[str, str]:
    """Names the examples use but never bind that exactly one repository module defines at top level (reports
    often show `cache = LRUCache(2)` without its import) -> that module."""
    used: set[str] = set()
    bound: set[str] = set()
    for example in filter(None, map(parsed, statements)):
        for node in ast.walk(example):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                bound.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.Name):  # `pkg.parse(...)` uses `pkg`, not a bare `parse`
                (bound if isinstance(node.ctx, ast.Store) else used).add(node.id)
    found: dict[str, set[str]] = {}
    for path, source in sources.items():
        module = module_of(path)
        tree = parsed(source) if module is not None and not is_test_path(path) else None
        if module is None or tree is None:
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in used - bound:
                found.setdefault(node.name, set()).add(module)
    return {name: next(iter(mods)) for name, mods in found.items() if len(mods) == 1}


class FunctionIndex:
    """The repository function (innermost, qualified name) a file and line belong to; non-test files only."""

    def __init__(self, sources: Mapping[str, str]) -> None:
        self.sources = sources
        self._spans: dict[str, list[tuple[int, int, str]]] = {}

    def at(self, path: object, line: object) -> tuple[str, str] | None:
        if not (isinstance(path, str) and isinstance(line, int)) or path not in self.sources or is_test_path(path):
            return None
        if path not in self._spans:
            self._spans[path] = sorted(((s.start, s.end, s.qualname) for s in symbols(path, self.sources[path])),
                                       key=lambda span: span[1] - span[0])
        return next(((path, q) for start, end, q in self._spans[path] if start <= line <= end), None)


@dataclass(frozen=True)
class ExampleRun:
    """What the report's examples ran."""

    statements: int = 0
    """Statements run (0: the report has no runnable example)."""
    called: tuple[tuple[str, str], ...] = ()
    """(path, qualified name) of the repository functions they called, in the order of the first call."""
    errors: str = ""
    """Tracebacks of the statements that raised."""
    shown: tuple[str, ...] = ()
    """What each statement showed (printed, echoed, raised; see `_tracer.py`): compared across candidates."""
    problem: str = ""
    """Why the examples gave no report although there were some (a timeout, a tracer that did not finish)."""
    lines: frozenset[tuple[str, int]] = frozenset()
    """(path, line) the examples ran inside the functions a line-traced run asked for (`run_examples`' `lines`),
    kept only inside a repository function."""


def examples_reach_code(base: ExampleRun) -> bool:
    """The issue's examples, run on the unchanged code, gave a report and called repository code: a snippet
    using a name it never defines, or no example at all, cannot tell candidates apart."""
    return bool(base.shown) and bool(base.called) and not base.problem


def examples_comparable(base: ExampleRun, base_again: ExampleRun) -> bool:
    """The examples can tell a change: they reach repository code and showed the same on both runs of the
    unchanged code."""
    return examples_reach_code(base) and base.shown == base_again.shown


def examples_changed(base: ExampleRun, base_again: ExampleRun, runs: Mapping[str, ExampleRun]) -> dict[str, bool]:
    """Per patch: whether the issue's examples show something else on it than on the unchanged code (a run that
    gave no report counts as unchanged); empty when they cannot tell (`examples_comparable`)."""
    if not examples_comparable(base, base_again):
        return {}
    return {patch: bool(run.shown) and not run.problem and run.shown != base.shown for patch, run in runs.items()}


def examples_shown(base: ExampleRun, base_again: ExampleRun, runs: Mapping[str, ExampleRun]) -> dict[str, tuple[str, ...]]:
    """Per patch on which the issue's examples show something else than on the unchanged code
    (`examples_changed`), what they show: candidates that show the same behave the same on the report."""
    changed = examples_changed(base, base_again, runs)
    return {patch: runs[patch].shown for patch, moved in changed.items() if moved}


@dataclass(frozen=True)
class SuiteSpectrum:
    """Which functions the passing and the failing tests of the suite called."""

    passed: int = 0
    failed: int = 0
    functions: Mapping[tuple[str, str], tuple[int, int]] | None = None
    """(path, qualified name) -> (passing tests that called it, failing tests that called it)."""
    ids: tuple[str, ...] = ()
    """Node ids of the tests that passed or failed, in the order they ran (empty: not recorded)."""
    failed_ids: frozenset[int] = frozenset()
    """Indexes into `ids` of the tests that failed."""
    reach: Mapping[tuple[str, str], frozenset[int]] | None = None
    """(path, qualified name) -> indexes into `ids` of the tests that called it (None: not recorded)."""
    stopped: tuple[int, int] | None = None
    """The run stopped at its time (`stop_after_s`): (tests that ran, tests collected); None: it ran to its end."""
    lines: Mapping[tuple[str, int], tuple[int, int]] | None = None
    """(path, line) -> (passing tests that ran it, failing tests that ran it), for the lines of the functions a
    line-traced run asked for (`run_spectrum`'s `line_targets`; None: not asked), kept only inside a repository
    function."""


def read_example_run(output: str, index: FunctionIndex, statements: int) -> ExampleRun:
    """The tracer's report (its last `MARKER` line), rows kept only where they name a repository function."""
    line = next((x for x in reversed(output.splitlines()) if x.startswith(MARKER)), None)
    if line is None or len(line) > MAX_REPORT_CHARS:
        return ExampleRun(statements, problem="the tracer wrote no report" if line is None else "report too large")
    try:
        data = json.loads(line[len(MARKER):])
        rows, errors = list(data["calls"]), [str(e) for e in data.get("errors", [])]
        shown = tuple(_ADDRESS.sub(" at 0x?", str(x))[-MAX_SHOWN_CHARS:] for x in data.get("shown", [])[:statements])
    except (ValueError, KeyError, TypeError, AttributeError):
        return ExampleRun(statements, problem="the tracer's report is not what it writes")
    ordered = sorted((row[3], key) for row in rows
                     if isinstance(row, list) and len(row) >= 4 and isinstance(row[3], int)
                     and (key := index.at(row[0], row[2])) is not None)
    called = list(dict.fromkeys(key for _, key in ordered))
    ran = data.get("lines") if isinstance(data, dict) else None
    lines = frozenset((row[0], row[1]) for row in (ran if isinstance(ran, list) else [])[:MAX_LINE_ROWS]
                      if isinstance(row, list) and len(row) == 2 and index.at(row[0], row[1]) is not None)
    return ExampleRun(statements, tuple(called), "\n".join(errors)[-6000:], shown, lines=lines)


def read_spectrum(text: str, index: FunctionIndex) -> SuiteSpectrum | None:
    """The plugin's report; None when it is missing or not what the plugin writes."""
    if not text or len(text) > MAX_REPORT_CHARS:
        return None
    try:
        data = json.loads(text)
        passed, failed = int(data["tests"]["passed"]), int(data["tests"]["failed"])
        rows = list(data["functions"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    ids = _read_ids(data.get("ids"), passed + failed)
    functions: dict[tuple[str, str], tuple[int, int]] = {}
    reach: dict[tuple[str, str], set[int]] = {}
    for row in rows:
        if not (isinstance(row, list) and len(row) in (4, 5) and all(isinstance(x, int) for x in row[2:4])):
            continue
        key = index.at(row[0], row[1])
        if key is not None:  # a function's nested code (lambdas, comprehensions) counts for the function
            p, f = functions.get(key, (0, 0))
            functions[key] = (max(p, min(row[2], passed)), max(f, min(row[3], failed)))
            if ids and len(row) == 5 and isinstance(row[4], list):
                reach.setdefault(key, set()).update(i for i in row[4] if isinstance(i, int) and 0 <= i < len(ids))
    failed_ids = data.get("failed_ids") if ids else None
    failing = frozenset(i for i in failed_ids if isinstance(i, int) and 0 <= i < len(ids)) if isinstance(failed_ids, list) else frozenset()
    return SuiteSpectrum(max(passed, 0), max(failed, 0), functions, ids, failing,
                         {k: frozenset(v) for k, v in reach.items()} if ids else None,
                         lines=_read_lines(data.get("lines"), index, passed, failed))


MAX_LINE_ROWS = 20_000
"""Of a report's line rows, the most read (a few functions' lines are a few hundred)."""


def _read_lines(rows: object, index: FunctionIndex, passed: int, failed: int,
                ) -> dict[tuple[str, int], tuple[int, int]] | None:
    """The plugin's line rows (None when it wrote none), each kept only inside a repository function, its
    counts bounded by the run's own."""
    if not isinstance(rows, list):
        return None
    lines: dict[tuple[str, int], tuple[int, int]] = {}
    for row in rows[:MAX_LINE_ROWS]:
        if not (isinstance(row, list) and len(row) == 4 and all(isinstance(x, int) for x in row[1:])):
            continue
        if index.at(row[0], row[1]) is not None:
            lines[(row[0], row[1])] = (max(0, min(row[2], passed)), max(0, min(row[3], failed)))
    return lines


MAX_TEST_ID_CHARS = 500
"""A longer test id is not what pytest writes for a test of a repository (the reach is then not used)."""


def _read_ids(value: object, tests: int) -> tuple[str, ...]:
    """The plugin's test ids, or () when they are missing, incomplete or not ids pytest could write."""
    if not (isinstance(value, list) and len(value) == tests and tests > 0):
        return ()
    if not all(isinstance(x, str) and 0 < len(x) <= MAX_TEST_ID_CHARS and "\n" not in x for x in value):
        return ()
    return tuple(value)


def ochiai(spectrum: SuiteSpectrum | None, examples: ExampleRun) -> dict[tuple[str, str], float]:
    """Suspiciousness ef / sqrt(F * (ef + ep)) of every function a failing run reached; the examples count as
    one failing run when they called repository code."""
    functions = dict(spectrum.functions or {}) if spectrum else {}
    failing = spectrum.failed if spectrum else 0
    if examples.called:
        failing += 1
        for key in examples.called:
            p, f = functions.get(key, (0, 0))
            functions[key] = (p, f + 1)
    if not failing:
        return {}
    return {key: round(f / math.sqrt(failing * (f + p)), 4) for key, (p, f) in functions.items() if f}


LineTarget = tuple[str, int, int]
"""(path, first line, last line) of a function whose lines a run records (`agentflow.repair.locate.lines`)."""


async def run_examples(sandbox: Sandbox, python: str, issue: str, index: FunctionIndex, *,
                       timeout_s: float = 60.0, line_targets: Sequence[LineTarget] = ()) -> ExampleRun:
    """Run the report's examples in the sandbox's workspace (its current state) under the call tracer (and
    recording the lines they run of the `line_targets` functions)."""
    examples = list(read_statement(issue).examples)
    if not examples:
        return ExampleRun()
    spec: dict[str, Any] = {"statements": examples, "names": names_to_import(examples, index.sources)}
    if line_targets:
        spec["lines"] = [list(target) for target in line_targets]
    await sandbox.write_file(f"{TRACE_DIR}/trace_examples.py", _TRACER.read_text())
    await sandbox.write_file(f"{TRACE_DIR}/examples.json", json.dumps(spec))
    # the repository root on the path, as pytest has it (the tracer lives in the scratch folder)
    script = (f"{test_env(EVAL_DIR)}{python} {TRACE_DIR}/trace_examples.py "
              f"{TRACE_DIR}/examples.json")
    result = await sandbox.exec(sh_command(script), timeout=timeout_s)
    run = read_example_run(result.stdout, index, len(examples))
    if run.problem and result.limit_hit:
        run = dataclasses.replace(run, problem=f"{run.problem} (stopped by the sandbox's {result.limit_hit} limit)")
    return run


FIRST_PATH = f"{TRACE_DIR}/first_tests.txt"
"""The test files a traced run stopping at a time starts with (`FIRST_TESTS_ENV`)."""
CONTINUE_ON_COLLECTION_ERRORS = "--continue-on-collection-errors"
"""pytest's option to run the tests of the modules that import when others do not (pytest >= 3.0)."""
TIMED_OUT = "the suite did not finish within"
"""How a spectrum problem says the traced suite ran out of time (`repair.testshare` reports it)."""


async def run_spectrum(sandbox: Sandbox, test_cmd: str, index: FunctionIndex, *, timeout_s: float,
                       env: Mapping[str, str] | None = None, stop_after_s: float | None = None,
                       first: Sequence[str] = (), line_targets: Sequence[LineTarget] = (),
                       ) -> tuple[SuiteSpectrum | None, str]:
    """Run the suite (a pytest command) with the spectrum plugin: (spectrum, ""), or (None, why there is none).
    `stop_after_s`: no test starts after it (a `<python> -m pytest` command, run by the runner script), so a run
    slower than planned ends on the tests that ran, with their spectrum, instead of timing out with none; the
    test files `first` run first, in order (the rest as collected). With `line_targets` the plugin also records
    the lines each test ran of those functions (`SuiteSpectrum.lines`)."""
    out = f"{TRACE_DIR}/spectrum.json"
    await sandbox.write_file(f"{TRACE_DIR}/agentflow_spectrum.py", _SPECTRUM.read_text())
    await sandbox.exec(sh_command(f"rm -f {out}"))
    command, run_env = test_cmd, dict(env or {})
    if stop_after_s is not None and (command := runner_command(test_cmd, EVAL_DIR)) != test_cmd:
        await install_runner(sandbox, EVAL_DIR)
        if first:
            await sandbox.write_file(FIRST_PATH, "".join(f"{path}\n" for path in first))
        run_env = stop_env(env, stop_after_s, FIRST_PATH if first else None)
    lines = ""
    if line_targets:
        await sandbox.write_file(f"{TRACE_DIR}/lines.json", json.dumps({"functions": [list(t) for t in line_targets]}))
        lines = f'AGENTFLOW_SPECTRUM_LINES="$PWD/{TRACE_DIR}/lines.json" '
    # PYTEST_ADDOPTS loads the plugin whatever the command's own options (`-p` works with plugin autoload off);
    # the options `env` has for pytest (the test files the pre-flight left out) are kept. A test module that
    # cannot be imported (a missing optional dependency, or the bug itself) would otherwise stop pytest before
    # any test runs: the traced run is evidence, not a verdict, so every module that imports still runs
    script = (f'{test_env(EVAL_DIR)}PYTHONPATH="$PWD/{TRACE_DIR}:$PYTHONPATH" '
              f'PYTEST_ADDOPTS="-p agentflow_spectrum {CONTINUE_ON_COLLECTION_ERRORS} ${{PYTEST_ADDOPTS:-}}" '
              f'AGENTFLOW_SPECTRUM_OUT="$PWD/{out}" {lines}{command}')
    result = await sandbox.exec(sh_command(script), env=run_env or None, timeout=timeout_s)
    stopped = f" (stopped by the sandbox's {result.limit_hit} limit)" if result.limit_hit else ""
    if result.timed_out:
        stopped += f" ({TIMED_OUT} {timeout_s:.0f}s)"
    try:
        text = await sandbox.read_file(out)
    except (SandboxError, OSError):  # the suite did not start, or it is not pytest
        return None, f"the suite wrote no spectrum (exit {result.exit_code}){stopped}"
    spectrum = read_spectrum(text, index)
    if spectrum is None:
        return None, "the suite's spectrum is not what the plugin writes"
    if spectrum.passed + spectrum.failed == 0:  # a spectrum of no test is no evidence, and says why not
        return None, f"the traced suite ran no test (exit {result.exit_code}){stopped}"
    if (stop_line := STOPPED_LINE.search(result.output)) is not None:
        spectrum = dataclasses.replace(spectrum, stopped=(int(stop_line.group(1)), int(stop_line.group(2))))
    return spectrum, ""


async def gather_evidence(sandbox: Sandbox, python: str, issue: str, sources: Mapping[str, str], *,
                          test_cmd: str | None, test_timeout_s: float,
                          env: Mapping[str, str] | None = None,
                          narrow: Callable[[ExampleRun], str | None] | None = None,
                          stop_after_s: float | None = None, first: Sequence[str] = (),
                          ) -> tuple[RunEvidence, dict[str, Any]]:
    """Run the examples and (with a pytest `test_cmd`) the suite: the evidence for the ranking, and its summary
    as plain JSON (the state's `spectrum`). `narrow`, given what the examples ran, may name a shorter command to
    trace instead of `test_cmd` (the test-time budget's); `stop_after_s`: no test of the suite starts after it,
    the test files `first` first (`run_spectrum`; the summary's `stopped` then says how many ran)."""
    index = FunctionIndex(sources)
    examples = await run_examples(sandbox, python, issue, index)
    spectrum, problems = None, [examples.problem] if examples.problem else []
    if test_cmd and narrow is not None:
        test_cmd = narrow(examples) or test_cmd
    if test_cmd and "pytest" in test_cmd:
        spectrum, problem = await run_spectrum(sandbox, test_cmd, index, timeout_s=test_timeout_s, env=env,
                                               stop_after_s=stop_after_s, first=first)
        problems += [problem] if problem else []
    else:
        problems.append("no spectrum: the test command is not pytest")
    suspicion = ochiai(spectrum, examples)
    summary: dict[str, Any] = {
        "examples": examples.statements,
        "executed": [list(k) for k in examples.called],
        "errors": examples.errors,  # shown, not ranked on: an example may show an exception the fix keeps
        "shown": list(examples.shown),  # per statement, what it gave (the reproduction from examples reads it)
        "tests": {"passed": spectrum.passed, "failed": spectrum.failed} if spectrum else None,
        "suspicion": [[p, q, v] for (p, q), v in by_suspicion(suspicion)[:200]],
        "reach": reach_summary(spectrum),
        "problems": problems,  # what gave no evidence, and why (the ranking then goes on without it)
        "stopped": list(spectrum.stopped) if spectrum and spectrum.stopped else None,
    }
    return evidence_from_json(summary), summary


def by_suspicion(suspicion: Mapping[tuple[str, str], float]) -> list[tuple[tuple[str, str], float]]:
    """Functions most suspicious first; ties by path, then qualified name: the traced suite's set of called
    functions comes back in hash order, which differs from run to run."""
    return sorted(suspicion.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1]))


def reach_summary(spectrum: SuiteSpectrum | None) -> dict[str, Any] | None:
    """Which tests reach which function, as plain JSON (the state's `spectrum.reach`, `SuiteReach.from_json`);
    None when the suite recorded no ids."""
    if spectrum is None or not spectrum.ids or spectrum.reach is None:
        return None
    return {"ids": list(spectrum.ids), "failed": sorted(spectrum.failed_ids),
            "functions": [[p, q, sorted(v)] for (p, q), v in sorted(spectrum.reach.items())]}


def evidence_from_json(data: Mapping[str, Any] | None) -> RunEvidence:
    """The `RunEvidence` of a `gather_evidence` summary (None or {} when no trace ran: no evidence)."""
    if not data:
        return RunEvidence()
    executed = frozenset((str(p), str(q)) for p, q in data.get("executed") or [])
    suspicion = {(str(p), str(q)): float(v) for p, q, v in data.get("suspicion") or []}
    return RunEvidence(executed, suspicion, line_marks(data.get("lines")))


def line_marks(data: object) -> dict[str, tuple[int, ...]]:
    """path -> the lines a line spectrum marked (`lines.marks_summary`, the summary's `lines`; empty when none)."""
    if not isinstance(data, Mapping):
        return {}
    marks: dict[str, list[int]] = {}
    for row in data.get("marks") or []:
        if isinstance(row, list) and len(row) >= 2 and isinstance(row[0], str) and isinstance(row[1], int):
            marks.setdefault(row[0], []).append(row[1])
    return {path: tuple(sorted(lines)) for path, lines in marks.items()}
