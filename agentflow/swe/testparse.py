"""Per-test outcomes from pytest output: the `-rA` short summary lines or a JUnit XML report."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

_SUMMARY_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) (.+)$")
_SKIPPED = re.compile(r"^\[\d+\] (.+?):(\d+): ")
_OUTCOMES = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error", "XFAIL": "xfailed", "XPASS": "xpassed",
             "SKIPPED": "skipped"}
# When one test has several lines (a teardown error after a pass), the worse outcome wins.
_RANK = {"passed": 0, "xfailed": 0, "skipped": 1, "xpassed": 2, "failed": 3, "error": 4}


def _put(results: dict[str, str], test: str, outcome: str) -> None:
    old = results.get(test)
    if old is None or _RANK[outcome] > _RANK[old]:
        results[test] = outcome


def parse_pytest_summary(output: str) -> dict[str, str]:
    """Outcomes from `pytest -rA` output: test node id -> passed | failed | error | skipped | xfailed | xpassed."""
    lines = output.splitlines()
    start = 0
    for i, line in enumerate(lines):
        if "short test summary info" in line:
            start = i + 1
    results: dict[str, str] = {}
    for line in lines[start:]:
        m = _SUMMARY_LINE.match(line.rstrip())
        if not m:
            continue
        word, rest = m.groups()
        if word == "SKIPPED":
            s = _SKIPPED.match(rest)
            test = f"{s.group(1)}:{s.group(2)}" if s else rest
        else:
            test = rest.split(" - ", 1)[0].strip()
        _put(results, test, _OUTCOMES[word])
    return results


def parse_junit_xml(text: str) -> dict[str, str]:
    """Outcomes from a JUnit XML report: `classname::name` -> outcome. Raises ValueError if it is not XML."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ValueError(f"not a JUnit XML report: {exc}") from None
    results: dict[str, str] = {}
    for case in root.iter("testcase"):
        name = case.get("name", "?")
        classname = case.get("classname")
        test = f"{classname}::{name}" if classname else name
        outcome = "passed"
        for child in case:
            if child.tag == "failure":
                outcome = "failed"
            elif child.tag == "error":
                outcome = "error"
            elif child.tag == "skipped":
                outcome = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
        _put(results, test, outcome)
    return results
