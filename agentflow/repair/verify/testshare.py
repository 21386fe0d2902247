"""The repair's test time, one budget every test run of a task goes through (`TestTimeShare`; the numbers and
events: docs/concepts/repair.md, step 5).

The pre-flight's run at the base commit draws on it first (at most `PREFLIGHT_PART` of the share): it starts with
the test files nearest the issue (`preflight_order`) and starts no test after `FIT_MARGIN` of its timeout, so a
suite too slow for it is shortened, not timed out, and its pace is still measured (`TestTimeShare.measured`). From
that pace each later step gets an allowance (`TestTimeShare.allow`): its own timeout, cut to what is left of the
share. A step whose full run would not fit runs a shortened selection instead of timing out: the tests failing at
the base commit first, then those nearest the suspects (`localization_selection`) or reaching the change, as
many as fit; the traced run and a shortened candidate run also start no test after `FIT_MARGIN` of their timeout
(the tracer's slowdown varies, a candidate may be slower than the base). What was shortened or still timed out
is reported (`TestTimeShare.report`): never silent.

The share is of the task's *expected* wall time, re-planned at every step (`WallPlan`): the seconds so far plus
the model calls left times the seconds per call, at most the wall limit. A task that will end well before its
limit gets the share of the time it will take, not of the limit.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentflow.budget import Budget, CallTime
from agentflow.pysyntax import parsed
from agentflow.repair.locate.spectrum import module_of
from agentflow.repair.locate.statement import read_statement
from agentflow.swe.patch import is_test_path

_FAILED_ID = re.compile(r"^(?:FAILED|ERROR) (\S+::\S+)", re.MULTILINE)

Reporter = Callable[[dict[str, Any]], object]

FIT_MARGIN = 0.8
"""A run is planned to take at most this part of its allowance (the base run's pace varies with the load)."""
START_SHARE = 0.1
"""Of the base run's seconds, the part taken as pytest's start and collection rather than the tests'."""
PREFLIGHT_PART = 1 / 3
"""Of the test-time share, the most the pre-flight's run may take (the rest is the later steps')."""


def failing_ids(output: str) -> list[str]:
    """The test ids a pytest log's short summary names as failed or erroring."""
    return list(dict.fromkeys(_FAILED_ID.findall(output)))


@dataclass(frozen=True)
class Allowance:
    """What one step's test run may take: its timeout, and how many tests when its full run would not fit."""

    timeout_s: float
    tests: int | None = None
    """None: the full run fits; else the run is shortened to at most this many tests (the failing ones kept)."""
    expected_s: float | None = None
    """The full run's expected seconds (the base run's, times the step's slowdown)."""


def expected_wall_s(elapsed_s: float, calls_left: float | None, call_s: float, wall_limit_s: float | None,
                    ) -> float | None:
    """The task's expected wall seconds: `elapsed_s` so far plus `calls_left` model calls of `call_s` seconds
    each, at most `wall_limit_s`; without a model-call limit (`calls_left` None) the wall limit (None: neither,
    nothing to plan against)."""
    if calls_left is None:
        return wall_limit_s
    expected = elapsed_s + calls_left * call_s
    return expected if wall_limit_s is None else min(expected, wall_limit_s)


@dataclass(frozen=True)
class WallPlan:
    """What a task's expected wall time is planned from, read afresh at every step: its budget (the seconds so
    far, the model calls left, those made and their seconds), the wall limit, and the seconds per call before
    the task's first (`earlier`, the run's finished tasks' calls, else `default_call_s`)."""

    budget: Budget
    wall_limit_s: float | None
    default_call_s: float
    earlier: CallTime = field(default_factory=CallTime)
    """The model calls of the run's tasks finished so far (one object the run adds each task's to)."""

    def call_s(self) -> float:
        """Seconds per model call: the task's own calls' mean, else the earlier tasks', else the setting."""
        own = self.budget.timed().mean_s()
        if own is not None:
            return own
        earlier = self.earlier.mean_s()
        return earlier if earlier is not None else self.default_call_s

    def expected_s(self) -> float | None:
        return expected_wall_s(self.budget.used.wall_seconds, self.budget.remaining("model_calls"), self.call_s(),
                               self.wall_limit_s)


@dataclass
class TestTimeShare:
    """What the repair's test runs may still spend (None: no share), the base run's pace, and who hears about
    what was shortened or timed out."""

    __test__ = False  # not a pytest class

    limit_s: float | None = None
    """The share's seconds when fixed (no `plan`); None: no share."""
    share: float | None = None
    """The fraction of the (expected) wall time the share is."""
    plan: WallPlan | None = None
    """The task's expected wall time, re-planned at every step: the share is `share` x that (None: `limit_s`)."""
    spent_s: float = 0.0
    base_s: float | None = None
    """T: the pre-flight's run of the suite at the base commit."""
    base_tests: int | None = None
    """N: the tests that run counted."""
    reporter: Reporter | None = None
    reports: list[dict[str, Any]] = field(default_factory=list)

    def limit(self) -> float | None:
        """The share's seconds now: `share` x the expected wall time when planned, else the fixed `limit_s`."""
        if self.plan is None or self.share is None:
            return self.limit_s
        expected = self.plan.expected_s()
        return None if expected is None else self.share * expected

    def left_s(self) -> float | None:
        limit = self.limit()
        return None if limit is None else max(0.0, limit - self.spent_s)

    def timeout(self, own_s: float, floor_s: float) -> float:
        """A run's timeout: its own, cut to what is left of the share (never under `floor_s`)."""
        left = self.left_s()
        return own_s if left is None else min(own_s, max(left, floor_s))

    def preflight_timeout(self, own_s: float, floor_s: float) -> float:
        """The pre-flight's timeout: its own, cut to `PREFLIGHT_PART` of the share (never under `floor_s`)."""
        limit = self.limit()
        return own_s if limit is None else min(own_s, max(PREFLIGHT_PART * limit, floor_s))

    def measured(self, seconds: float | None, tests: int | None, *, ran: int | None = None) -> None:
        """The base run's T and N (the pre-flight's), the pace every allowance is planned at. `ran`: the run
        stopped after that many of the `tests`, in `seconds`: T is the whole suite's, estimated at its pace."""
        self.base_s, self.base_tests = seconds, tests if tests and tests > 0 else None
        if seconds is not None and ran is not None and self.base_tests:
            part = START_SHARE + (1 - START_SHARE) * min(ran, self.base_tests) / self.base_tests
            self.base_s = seconds / part

    def expected(self, tests: int | None = None, *, slowdown: float = 1.0) -> float | None:
        """Expected seconds of a run of `tests` tests (None: the whole suite) at the base run's pace."""
        if self.base_s is None:
            return None
        if tests is None or not self.base_tests:
            return self.base_s * slowdown
        start = START_SHARE * self.base_s
        return (start + (self.base_s - start) * min(tests, self.base_tests) / self.base_tests) * slowdown

    def allow(self, own_timeout_s: float, floor_s: float, *, tests: int | None = None, slowdown: float = 1.0,
              shared: bool = True) -> Allowance:
        """A step's allowance: its timeout (its own, cut to the share's rest when `shared`) and, when its run
        of `tests` tests (None: the suite) is expected not to fit in it, how many tests it may run instead."""
        timeout = self.timeout(own_timeout_s, floor_s) if shared else own_timeout_s
        expected = self.expected(tests, slowdown=slowdown)
        if expected is None or expected <= FIT_MARGIN * timeout:
            return Allowance(timeout, None, expected)
        assert self.base_s is not None  # `expected` is known
        n = self.base_tests or 0
        start = START_SHARE * self.base_s * slowdown
        per_test = (self.base_s * slowdown - start) / n if n else 0.0
        room = FIT_MARGIN * timeout - start
        fit = int(room / per_test) if per_test > 0 and room > 0 else 0
        return Allowance(timeout, max(0, min(fit, tests if tests is not None else n)), expected)

    def spend(self, seconds: float) -> None:
        self.spent_s += seconds

    def report(self, step: str, action: str, **data: Any) -> None:
        """Say that `step` (localization, line spectrum, verification, confirmation) was `action` (shortened,
        skipped, timed_out)."""
        expected = self.plan.expected_s() if self.plan is not None else None
        limit = self.limit()
        found = {"step": step, "action": action, "share_s": _round(limit), "share": self.share if limit is not None else None,
                 "expected_wall_s": _round(expected), "spent_s": round(self.spent_s, 3), **data}
        self.reports.append(found)
        if self.reporter is not None:
            self.reporter(found)

    def shortened(self, step: str, ran: int, of: int | None, allowance: Allowance) -> None:
        self.report(step, "shortened", tests=ran, suite_tests=of, expected_s=_round(allowance.expected_s),
                    left_s=_round(self.left_s()), timeout_s=round(allowance.timeout_s, 1))

    def fit_comparison(self, step: str, failing: list[str], passing: list[str], allowance: Allowance,
                       ) -> list[str] | None:
        """The tests of `step`'s run comparing `failing` tests with `passing` ones (`allowance` planned for
        all of them): all of them when they fit, else the failing ones and as many passing ones as fit (said
        as shortened); None when not one passing test fits (said as skipped: without one, nothing compares)."""
        ran = len(failing) + len(passing)
        if allowance.tests is None:
            return [*failing, *passing]
        room = allowance.tests - len(failing)
        if room < 1:
            self.skipped(step, ran, allowance)
            return None
        kept = [*failing, *passing[:room]]
        self.shortened(step, len(kept), ran, allowance)
        return kept

    def skipped(self, step: str, tests: int, allowance: Allowance) -> None:
        """`step`'s run of `tests` tests was left out: not even the part of it worth running fits."""
        self.report(step, "skipped", tests=tests, expected_s=_round(allowance.expected_s),
                    left_s=_round(self.left_s()), timeout_s=round(allowance.timeout_s, 1))

    def timed_out(self, step: str, timeout_s: float, *, shortened: bool) -> None:
        self.report(step, "timed_out", timeout_s=round(timeout_s, 1), shortened=shortened)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def describe(report: dict[str, Any]) -> str:
    """A report as a progress line's text: `tests: localization ran 41 of 5,739 (time share 30% of the task's
    expected 380s, the whole run expected 102s)`."""
    share, timeout, wall = report.get("share"), report.get("timeout_s"), report.get("expected_wall_s")
    of_wall = f" of the task's expected {wall:.0f}s" if isinstance(wall, (int, float)) else ""
    bound = (f"time share {share:.0%}{of_wall}" if isinstance(share, (int, float)) and report.get("share_s") is not None
             else f"time limit {timeout:.0f}s" if isinstance(timeout, (int, float)) else "time limit")
    step = report.get("step")
    if report.get("action") == "shortened":
        of = report.get("suite_tests")
        whole = f"{of:,}" if isinstance(of, int) else "the suite"
        expected = report.get("expected_s")
        why = f", the whole run expected {expected:.0f}s" if isinstance(expected, (int, float)) else ""
        return f"tests: {step} ran {report.get('tests'):,} of {whole} ({bound}{why})"
    if report.get("action") == "skipped":
        expected = report.get("expected_s")
        why = f", the run expected {expected:.0f}s" if isinstance(expected, (int, float)) else ""
        return f"tests: {step} skipped, its {report.get('tests'):,} tests do not fit ({bound}{why})"
    return (f"tests: {step} timed out after {timeout}s ({bound})"
            f"{' (shortened run)' if report.get('shortened') else ''}")


# ------------------------------------------------------------------------------------- the shortened selection


def _imports(source: str) -> set[str]:
    """The modules a file imports (`from a.b import c` gives a.b and a.b.c)."""
    tree = parsed(source)
    if tree is None:
        return set()
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


_TEST_DEF = re.compile(r"^\s*(?:async\s+)?def\s+test", re.MULTILINE)


def test_count(source: str) -> int:
    """Tests a file defines (its `def test...` lines; a parametrized one counts once)."""
    return max(1, len(_TEST_DEF.findall(source)))


def localization_selection(failing: list[str], suspects: Iterable[str], sources: Mapping[str, str], limit: int,
                           ) -> tuple[list[str], int]:
    """What a shortened localization run passes pytest, and how many tests that is (estimated): the tests
    failing at the base commit, then whole test files, nearest first: the failing tests' own files, those
    importing a suspect module (a file the issue's examples ran or that the failing tests import) or named
    after one (`test_<module>.py`), those beside the failing tests; as many as `limit` tests hold."""
    picked: list[str] = list(dict.fromkeys(failing))
    count = len(picked)
    tests = {p: s for p, s in sources.items() if p.endswith(".py") and is_test_path(p)
             and p.rsplit("/", 1)[-1].startswith("test")}
    failing_files = list(dict.fromkeys(i.split("::", 1)[0] for i in failing))
    repo_modules = _repo_modules(sources)
    imported = {p: _imports(s) for p, s in tests.items()}
    suspect_modules = {m for p in suspects if (m := module_of(p)) is not None}
    for path in failing_files:  # what the failing tests import from the repository is suspect too
        suspect_modules |= {m for m in imported.get(path, set()) if m in repo_modules}
    suspect_modules -= {m.split(".", 1)[0] for m in repo_modules}  # `import pkg` is every test's: it says nothing
    stems = {m.rsplit(".", 1)[-1] for m in suspect_modules}
    folders = {p.rsplit("/", 1)[0] for p in failing_files if "/" in p}

    def nearness(path: str) -> int:
        if path in failing_files:
            return 0
        if imported[path] & suspect_modules or path.rsplit("/", 1)[-1][:-3].removeprefix("test_") in stems:
            return 1
        return 2 if path.rsplit("/", 1)[0] in folders else 3

    near = {p: nearness(p) for p in tests}
    for path in sorted((p for p in tests if near[p] <= 2), key=lambda p: (near[p], p)):
        inside = [i for i in picked if i.split("::", 1)[0] == path]
        more = max(0, test_count(tests[path]) - len(inside))
        if count + more > limit:
            continue
        picked = [i for i in picked if i not in inside] + [path]
        count += more
    return picked, count


def preflight_order(issue: str, sources: Mapping[str, str]) -> list[str]:
    """The test files the pre-flight's run starts with, nearest first (the localization's selection, with no
    limit): those of the tests the issue names, those importing a module it names (`pkg.sub` or `pkg/sub.py`)
    or one those tests import, those beside the named tests. Only a run that has to stop early leaves out what
    comes after them."""
    named = [i for i in read_statement(issue).failing_tests if i.split("::", 1)[0] in sources]
    suspects = [path for path in sources if not is_test_path(path) and _names(issue, path)]
    picked, _ = localization_selection(named, suspects, sources, sys.maxsize)
    return list(dict.fromkeys(item.split("::", 1)[0] for item in picked))


def _names(issue: str, path: str) -> bool:
    """Whether `issue` names the module `path` (its dotted name or its path, as a whole word)."""
    module = module_of(path)
    if module is None or "." not in module:  # a top-level name is every test's: it says nothing
        return False
    return any(re.search(rf"(?<![\w./]){re.escape(name)}(?![\w/])", issue) for name in (module, path))


def _repo_modules(sources: Mapping[str, str]) -> set[str]:
    return {m for p in sources if not is_test_path(p) and (m := module_of(p)) is not None}


def bounded(first: list[str], then: list[str], limit: int) -> list[str]:
    """`first` (always) and then `then`, in order, up to `limit` in all."""
    keep = list(dict.fromkeys(first))
    chosen = set(keep)
    more = [item for item in dict.fromkeys(then) if item not in chosen]
    return keep + more[: max(0, limit - len(keep))]
