"""Per-test outcomes from pytest output: the `-rA` short summary lines."""

from __future__ import annotations

import re

_SUMMARY_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\s+(.+)$")
_SKIPPED = re.compile(r"^\[\d+\] (.+?):(\d+): ")
_OUTCOMES = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error", "XFAIL": "xfailed", "XPASS": "xpassed",
             "SKIPPED": "skipped"}
# When one test has several lines (a teardown error after a pass), the worse outcome wins.
_RANK = {"passed": 0, "xfailed": 0, "skipped": 1, "xpassed": 2, "failed": 3, "error": 4}


def parse_pytest_summary(output: str) -> dict[str, str]:
    """Outcomes from `pytest -rA` output: test node id -> passed | failed | error | skipped | xfailed | xpassed
    (a skipped test as `path:line`). Lines before the first summary header are the tests' own output and are
    passed over; a command that runs pytest more than once has every run's summary read."""
    lines = output.splitlines()
    start = next((i + 1 for i, line in enumerate(lines) if "short test summary info" in line), 0)
    results: dict[str, str] = {}
    for line in lines[start:]:
        m = _SUMMARY_LINE.match(line.strip())
        if not m:
            continue
        word, rest = m.groups()
        if word == "SKIPPED":
            s = _SKIPPED.match(rest)
            test = f"{s.group(1)}:{s.group(2)}" if s else rest
        else:
            test = rest.split(" - ", 1)[0].strip()
        outcome = _OUTCOMES[word]
        if test not in results or _RANK[outcome] > _RANK[results[test]]:
            results[test] = outcome
    return results
