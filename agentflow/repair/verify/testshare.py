"""The repair's test time, bounded by a share of the task's wall time (`RepairConfig.test_time_share`).

The call-traced localization run and the candidates' verifications draw on one allowance. A run whose expected
time (the base commit's run of the same tests) does not fit in what is left runs fewer tests instead: those
failing at the base commit, and, for a candidate, those reaching the functions it changes; its timeout is what
is left (at least the shortest timeout). What was shortened, and any run that still timed out, is reported
through `TestTimeShare.report` (the task's `repair.test_time` events and progress lines): never silent.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_FAILED_ID = re.compile(r"^(?:FAILED|ERROR) (\S+::\S+)", re.MULTILINE)

Reporter = Callable[[dict[str, Any]], object]


def failing_ids(output: str) -> list[str]:
    """The test ids a pytest log's short summary names as failed or erroring."""
    return list(dict.fromkeys(_FAILED_ID.findall(output)))


@dataclass
class TestTimeShare:
    """What the repair's test runs may still spend (None: no wall time, no share) and who hears about it."""

    __test__ = False  # not a pytest class

    limit_s: float | None = None
    spent_s: float = 0.0
    reporter: Reporter | None = None
    reports: list[dict[str, Any]] = field(default_factory=list)

    def left_s(self) -> float | None:
        return None if self.limit_s is None else max(0.0, self.limit_s - self.spent_s)

    def fits(self, expected_s: float | None) -> bool:
        """Whether a run expected to take `expected_s` fits in what is left (an unknown time fits)."""
        left = self.left_s()
        return left is None or expected_s is None or expected_s <= left

    def timeout(self, own_s: float, floor_s: float) -> float:
        """A run's timeout: its own, cut to what is left of the share (never under `floor_s`)."""
        left = self.left_s()
        return own_s if left is None else min(own_s, max(left, floor_s))

    def spend(self, seconds: float) -> None:
        self.spent_s += seconds

    def report(self, step: str, action: str, **data: Any) -> None:
        """Say that `step` (localization, verification) was `action` (shortened, timed_out)."""
        found = {"step": step, "action": action, "share_s": self.limit_s, "spent_s": round(self.spent_s, 3), **data}
        self.reports.append(found)
        if self.reporter is not None:
            self.reporter(found)


def describe(report: dict[str, Any]) -> str:
    """A report as a progress line's text."""
    share = report.get("share_s")
    of = f" of the {share:.0f}s test-time share" if isinstance(share, (int, float)) else ""
    if report.get("action") == "shortened":
        return (f"test time: {report.get('step')} runs {report.get('tests')} test(s) instead of the suite "
                f"(expected {report.get('expected_s')}s, {report.get('left_s')}s left{of})")
    return (f"test time: {report.get('step')} timed out after {report.get('timeout_s')}s{of}"
            f"{' (shortened run)' if report.get('shortened') else ''}")
