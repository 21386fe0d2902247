"""Spending test time on the fix: which of the repository's tests a candidate's change can affect, and how long
a test run may take (docs/concepts/repair.md, step 5).

A test that never called a function a patch changes runs the same code on the candidate as at the base commit,
so its result stands. The suite's call-traced run at the base (`agentflow.repair.locate.spectrum`) records which
tests reach which function (`SuiteReach`); a candidate runs the tests that reach what it changed, with those that
failed at the base (they show the bug, even through a path the trace missed), and its whole-suite result is
estimated from theirs (`TargetedRun`). A finalist runs the whole suite before it is submitted: code run at import
or handed to C reaches tests the trace does not see. A change outside any function (module level, a new or
non-Python file) can affect any test, so it runs the whole suite, as any patch does without a recorded reach.
A run times out at a multiple of the base run (`timeout_from_base`): a candidate that hangs costs a few base
runs, not minutes.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentflow.repair.locate.localize import functions_touched
from agentflow.swe.patch import touched_in_place

Function = tuple[str, str]
"""(path, qualified name) of a repository function."""

MAX_TARGETED_ARGS_CHARS = 100_000
"""Test ids past this many characters of command line are not passed one by one (the whole suite runs)."""


@dataclass(frozen=True)
class SuiteReach:
    """Which of the suite's tests called which repository function in the base commit's traced run."""

    ids: tuple[str, ...]
    """Node ids of the tests that passed or failed at the base, in the order they ran."""
    failed: frozenset[int] = frozenset()
    """Indexes into `ids` of the tests that failed at the base."""
    functions: Mapping[Function, frozenset[int]] = field(default_factory=dict)
    """Function -> indexes into `ids` of the tests that called it."""

    @classmethod
    def from_json(cls, data: Any) -> SuiteReach | None:
        """The reach of a spectrum summary's `reach` (`spectrum.reach_summary`); None when there is none or it
        is not what that writes (the state is a checkpoint: read as data)."""
        if not isinstance(data, Mapping):
            return None
        ids, failed, rows = data.get("ids"), data.get("failed"), data.get("functions")
        if not (isinstance(ids, list) and ids and all(isinstance(x, str) for x in ids) and isinstance(rows, list)):
            return None
        n = len(ids)
        functions: dict[Function, frozenset[int]] = {}
        for row in rows:
            if isinstance(row, list) and len(row) == 3 and isinstance(row[0], str) and isinstance(row[1], str) \
                    and isinstance(row[2], list):
                functions[(row[0], row[1])] = frozenset(i for i in row[2] if isinstance(i, int) and 0 <= i < n)
        bad = frozenset(i for i in failed if isinstance(i, int) and 0 <= i < n) if isinstance(failed, list) else frozenset()
        return cls(tuple(ids), bad, functions)

    def tests_for(self, changed: set[Function]) -> list[int]:
        """Indexes of the tests that called any of `changed`, in the order they ran."""
        return sorted(set().union(*(self.functions.get(f, frozenset()) for f in changed)))


def changed_functions(patch: str, base_sources: Mapping[str, str]) -> set[Function] | None:
    """The functions a patch changes, read on the base commit's sources; None when it changes anything outside
    a function (module or class level, a new, deleted or non-Python file), which any test may reach."""
    paths = touched_in_place(patch)
    if not paths or any(path not in base_sources for path in paths):
        return None
    touched = functions_touched(patch, base_sources)
    if not touched or any(name.endswith(":") for name in touched):
        return None
    return {(name.split(":", 1)[0], name.split(":", 1)[1]) for name in touched}


def targeted_command(test_cmd: str, ids: list[str]) -> str | None:
    """`test_cmd` running only the tests `ids`; None when it cannot be narrowed this way: it names tests or
    folders of its own (the ids would add to them, not narrow them), or the ids are too many for one command."""
    try:
        words = shlex.split(test_cmd)
    except ValueError:
        return None
    runner = next((i for i, w in enumerate(words) if w == "pytest" or w.endswith("/pytest")), None)
    if runner is None or any(not w.startswith("-") for w in words[runner + 1:] if w != "no:cacheprovider"):
        return None
    if words[runner + 1:].count("-p") != words[runner + 1:].count("no:cacheprovider"):
        return None  # a plugin named by `-p NAME` would read as a test path; rare, and then the suite runs whole
    args = " ".join(shlex.quote(i) for i in ids)
    if not ids or len(args) > MAX_TARGETED_ARGS_CHARS:
        return None
    return f"{test_cmd} {args}"


@dataclass(frozen=True)
class TargetedRun:
    """The whole suite's result on a candidate, estimated from a run of the tests that reach its change."""

    failed: int
    """Of them, how many failed (or errored)."""
    base_failed_elsewhere: int
    """Tests not run that failed at the base (their result stands)."""
    total: int
    """Tests of the whole suite at the base."""

    @property
    def estimated_failed(self) -> int:
        return self.failed + self.base_failed_elsewhere

    @property
    def estimated_ok(self) -> bool:
        return self.estimated_failed == 0

    @property
    def counts(self) -> tuple[int, int]:
        """(passed, run) of the whole suite, as estimated."""
        return self.total - self.estimated_failed, self.total


def estimate(reach: SuiteReach, targets: list[int], passed: int, run: int) -> TargetedRun:
    """The whole suite's estimate after running `targets` (`passed` of `run` passed; tests that did not run
    because of a collection error count as failed)."""
    failed = max(0, len(targets) - passed) if run < len(targets) else max(0, run - passed)
    elsewhere = len(reach.failed - set(targets))
    return TargetedRun(failed, elsewhere, len(reach.ids))


def timeout_from_base(base_seconds: float | None, *, ratio: float, floor_s: float, ceiling_s: float) -> float:
    """How long a candidate's test run may take: `ratio` times the unchanged code's run, at least `floor_s`
    (a suite of a second still needs time to start), at most `ceiling_s`; `ceiling_s` when the base was never
    timed."""
    if not base_seconds or base_seconds <= 0:
        return ceiling_s
    return min(ceiling_s, max(floor_s, ratio * base_seconds))


__all__ = ["SuiteReach", "TargetedRun", "changed_functions", "estimate", "targeted_command", "timeout_from_base"]
