"""Line-level evidence inside the most suspect functions (a line spectrum): which of their lines the failing runs
execute, and how rarely the passing tests do.

After the function-level spectrum (`spectrum.py`) has ranked the functions, a second, targeted run records line
events only inside the top few of them (`_pytest_spectrum.py` and `_tracer.py` return a local tracer only for
their code objects, so the rest runs with call events alone): the failing tests and the passing tests that reach
those functions (`Workbench.line_evidence` picks them and fits them to the test-time budget), and the issue's
examples, which count as one more failing run when they called repository code (as in `spectrum.ochiai`).

A line's Ochiai suspiciousness is ef / sqrt(F * (ef + ep)), as a function's is. A line is marked for the edit
prompt only when it stands out (`standout_lines`): every failing run executed it, fewer than `FEW_PASSING` of
the passing tests that reach its function did, and at most `MAX_MARKS` lines of the function share its score;
of those, the `MAX_MARKS` most suspect are marked. A line every test of the function runs (its first statement)
says nothing the function's own rank did not.
The tests run in the order the suite ran them; when one that passed in the function-level run fails in this one
(it relied on a test left out), nothing is marked: counted as failing, it would make the wrong lines suspect.

Nothing the sandbox writes is trusted: `spectrum.read_spectrum` and `spectrum.read_example_run` keep rows only
inside repository functions of non-test files, and here only those inside the target functions are kept.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentflow.repair.locate.localize import symbols
from agentflow.repair.locate.spectrum import (
    ExampleRun,
    FunctionIndex,
    LineTarget,
    SuiteSpectrum,
    run_examples,
    run_spectrum,
)
from agentflow.sandbox.base import Sandbox
from agentflow.swe.patch import is_test_path

MAX_MARKS = 3
"""Lines marked at most, and in one function: more lines of a function sharing its top score are a block, not a
line to point at."""
FEW_PASSING = 0.5
"""A marked line is run by fewer than this part of the passing tests that reach its function."""


@dataclass(frozen=True)
class TargetFunction:
    """A suspect function whose lines are traced."""

    path: str
    qualname: str
    start: int
    """First line (its decorators' or its `def` line, as `localize.symbols` gives it)."""
    end: int

    @property
    def span(self) -> LineTarget:
        return (self.path, self.start, self.end)


@dataclass(frozen=True)
class LineMark:
    """One line that stands out in a target function."""

    path: str
    line: int
    failed: int
    """Failing runs that executed it (all of them)."""
    passed: int
    """Passing tests that executed it."""
    score: float
    """Its Ochiai suspiciousness."""


def line_targets(suspicion: Sequence[Sequence[Any]], sources: Mapping[str, str], top: int) -> list[TargetFunction]:
    """The `top` most suspect functions of a spectrum summary's `suspicion` ([path, qualified name, score]) that
    are functions of the repository's non-test sources, and those tied with the last of them (their order among
    themselves says nothing: the same tests reach them), at most twice `top`; ties in file order."""
    scored: list[tuple[float, TargetFunction]] = []
    for path, qualname, score in ((str(r[0]), str(r[1]), float(r[2])) for r in suspicion):
        if path not in sources or is_test_path(path):
            continue
        span = next(((s.start, s.end) for s in symbols(path, sources[path]) if s.qualname == qualname), None)
        if span is not None:
            scored.append((score, TargetFunction(path, qualname, *span)))
    scored.sort(key=lambda item: (-item[0], item[1].path, item[1].start))
    if len(scored) <= top:
        return [target for _, target in scored]
    last = scored[top - 1][0]
    return [target for score, target in scored if score >= last][: 2 * top]


def line_counts(targets: Sequence[TargetFunction], index: FunctionIndex, suite: SuiteSpectrum | None,
                examples: ExampleRun | None) -> tuple[int, dict[tuple[str, int], tuple[int, int]]]:
    """(failing runs F, (path, line) -> (ep, ef)) over the target functions' own lines: the suite's tests, and
    the examples as one failing run when they called repository code. A line of a function defined inside a
    target (its own code, its own rank) is not the target's."""
    wanted = {(t.path, t.qualname) for t in targets}
    counts: dict[tuple[str, int], tuple[int, int]] = {}
    failing = suite.failed if suite is not None else 0
    for key, (passed, failed) in (suite.lines or {}).items() if suite is not None else ():
        if index.at(*key) in wanted:
            counts[key] = (passed, failed)
    if examples is not None and examples.called:
        failing += 1
        for key in examples.lines:
            if index.at(*key) in wanted:
                passed, failed = counts.get(key, (0, 0))
                counts[key] = (passed, failed + 1)
    return failing, counts


TOP_LINES = 10
"""Lines the summary keeps by suspiciousness, marked or not (what a measurement compares with the gold lines)."""


def ranked_lines(targets: Sequence[TargetFunction], index: FunctionIndex, failing: int,
                 counts: Mapping[tuple[str, int], tuple[int, int]]) -> list[LineMark]:
    """The target functions' lines a failing run executed, most suspect (Ochiai) first, at most `TOP_LINES`."""
    wanted = {(t.path, t.qualname) for t in targets}
    lines = [LineMark(path, line, failed, passed, round(failed / math.sqrt(failing * (failed + passed)), 4))
             for (path, line), (passed, failed) in counts.items() if failed and index.at(path, line) in wanted]
    return sorted(lines, key=lambda m: (-m.score, m.path, m.line))[:TOP_LINES]


def standout_lines(targets: Sequence[TargetFunction], index: FunctionIndex, failing: int,
                   counts: Mapping[tuple[str, int], tuple[int, int]]) -> list[LineMark]:
    """The lines that stand out in the target functions (see the module docstring), most suspect first, at most
    `MAX_MARKS`; `targets` most suspect first."""
    if not failing:
        return []
    marks: list[LineMark] = []
    for target in targets:
        own = {line: pf for (path, line), pf in counts.items() if index.at(path, line) == (target.path, target.qualname)}
        # the failing runs and the passing tests that reach the function (a failing test that never calls it
        # fails for another reason: it does not make every line of this one less suspect)
        reach_failed = max((failed for _, failed in own.values()), default=0)
        reach_passed = max((passed for passed, _ in own.values()), default=0)
        if not (reach_failed and reach_passed):
            continue  # no passing test runs it: no line of it is rarer than another
        scored = [LineMark(target.path, line, failed, passed, round(failed / math.sqrt(failing * (failed + passed)), 4))
                  for line, (passed, failed) in own.items()
                  if failed == reach_failed and passed < FEW_PASSING * reach_passed]
        if not scored:
            continue
        best = max(m.score for m in scored)
        top = sorted((m for m in scored if m.score == best), key=lambda m: m.line)
        if len(top) <= MAX_MARKS:
            marks += top
    # the most suspect first; among equal ones, those of the more suspect function (`targets` is in that order)
    return sorted(marks, key=lambda m: -m.score)[:MAX_MARKS]


async def run_line_spectrum(sandbox: Sandbox, python: str, issue: str, sources: Mapping[str, str],
                            targets: Sequence[TargetFunction], *, test_cmd: str, failing: Collection[str],
                            timeout_s: float, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Run the issue's examples and the tests `test_cmd` names (`failing`: those of them that failed in the
    function-level run) recording the lines they execute inside `targets`; the line spectrum as plain JSON
    (`marks_summary`). The workspace is as the caller left it (the base)."""
    index = FunctionIndex(sources)
    spans = [t.span for t in targets]
    examples = await run_examples(sandbox, python, issue, index, line_targets=spans)
    problems = [examples.problem] if examples.problem else []
    suite, problem = await run_spectrum(sandbox, test_cmd, index, timeout_s=timeout_s, env=env, line_targets=spans)
    problems += [problem] if problem else []
    if suite is not None and suite.lines is None:
        problems.append("the suite's report has no lines")
    runs, counts = line_counts(targets, index, suite, examples)
    tests = {"passed": suite.passed, "failed": suite.failed} if suite is not None else None
    marks = standout_lines(targets, index, runs, counts)
    if suite is not None and (newly := newly_failing(suite, failing)):
        # a passing test counted as failing makes every line it ran look less suspect, and its own more
        problems.append(f"{newly} of the tests that passed in the suite's run failed in this one (they may rely on "
                        "tests not run): no line is marked")
        marks = []
    return marks_summary(targets, runs, tests, marks, problems, ranked_lines(targets, index, runs, counts))


def newly_failing(suite: SuiteSpectrum, failing: Collection[str]) -> int:
    """How many tests failed in the line-traced run that did not fail in the function-level run (by their ids;
    by the count when the run recorded none)."""
    if not suite.ids:
        return max(0, suite.failed - len(failing))
    known = set(failing)
    return sum(1 for i in suite.failed_ids if suite.ids[i] not in known)


def marks_summary(targets: Sequence[TargetFunction], failing: int, tests: Mapping[str, int] | None,
                  marks: Sequence[LineMark], problems: Sequence[str], top: Sequence[LineMark] = ()) -> dict[str, Any]:
    """The line spectrum as plain JSON (the state's `spectrum.lines`, read by `marks_from_json`)."""
    return {
        "functions": [[t.path, t.qualname] for t in targets],
        "failing_runs": failing,
        "tests": dict(tests) if tests is not None else None,
        "marks": [[m.path, m.line, m.failed, m.passed, m.score] for m in marks],
        "top": [[m.path, m.line, m.failed, m.passed, m.score] for m in top],
        "problems": list(problems),
    }
