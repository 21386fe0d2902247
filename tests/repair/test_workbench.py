"""Which reproduction scripts are kept: failures that look like the bug, not like the script's own mistakes; and
what a failing test log becomes as the next attempt's feedback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentflow.repair.verify.workbench import (
    failures_first,
    issue_values,
    reported_exceptions,
    summarise_failures,
    why_not_a_bug,
    why_not_the_reported_case,
)

SCRIPT = '  File "/workspace/.agentflow_eval/reproduce_issue.py", line 4, in <module>\n'
LIBRARY = '  File "/workspace/cachette/stats.py", line 19, in hit_rate\n'
ISSUE = "hit_rate() raises ZeroDivisionError on an empty cache; getbool raises KeyError instead of ConversionError"


@pytest.mark.parametrize(
    ("output", "kept"),
    [
        ("Traceback (most recent call last):\n" + SCRIPT + "AssertionError: 'a' != 'a=b'\n", True),
        ("Traceback (most recent call last):\n" + SCRIPT + LIBRARY + "ZeroDivisionError: division by zero\n", True),
        ("Traceback (most recent call last):\n" + SCRIPT + LIBRARY + "KeyError: 'maybe'\n", True),
        # raised in the package, but not what the issue reports: the script called the API wrongly
        ("Traceback (most recent call last):\n" + SCRIPT + LIBRARY +
         "AttributeError: 'str' object has no attribute 'items'\n", False),
        ("Traceback (most recent call last):\n" + SCRIPT + "AttributeError: 'Config' has no attribute 'x'\n", False),
        ("Traceback (most recent call last):\n" + SCRIPT + "ModuleNotFoundError: No module named 'inikit'\n", False),
        ('  File "reproduce_issue.py", line 2\n    x = (\nSyntaxError: unexpected EOF\n', False),
        ("killed\n", False),
    ],
)
def test_reproduction_failures_that_count(output: str, kept: bool):
    assert (why_not_a_bug(output, ISSUE) is None) is kept


def test_the_reason_names_the_unexpected_exception():
    output = "Traceback (most recent call last):\n" + SCRIPT + LIBRARY + "TypeError: f() takes 1 argument\n"
    why = why_not_a_bug(output, ISSUE)
    assert why is not None and "TypeError" in why and "does not describe" in why


INIKIT_2 = """getbool raises KeyError on a typo instead of ConversionError

```python
try:
    debug = cfg.getbool("server", "debug")
except ConversionError:
    debug = False
```

but the exception is not caught: I get `KeyError: 'maybe'` with a traceback pointing inside inikit.
`getint` and `getfloat` raise `ConversionError` for bad values, so I'd expect `getbool` to do the same."""
VALUES = '  File "/workspace/inikit/values.py", line 30, in to_int\n'


def test_an_error_the_issue_expects_is_not_the_bug():
    """inikit-2's kept script ran getint on a bad value: ConversionError, what the issue wants getbool to raise."""
    expected = "Traceback (most recent call last):\n" + SCRIPT + VALUES + "inikit.errors.ConversionError: not an integer: 'eight'\n"
    why = why_not_a_bug(expected, INIKIT_2)
    assert why is not None and "KeyError" in why and "ConversionError" in why
    reported = "Traceback (most recent call last):\n" + SCRIPT + VALUES + "KeyError: 'maybe'\n"
    assert why_not_a_bug(reported, INIKIT_2) is None


def test_reported_exceptions_are_those_shown_raised():
    assert reported_exceptions(INIKIT_2) == {"KeyError"}
    assert reported_exceptions("`Version.parse('1.2')` raises `IndexError: list index out of range` and\n"
                               "pkg.errors.VersionError: bad\n") == {"IndexError", "VersionError"}
    # named in prose or caught in code only: nothing is shown raised, so any exception the issue names counts
    assert reported_exceptions(ISSUE) == set()
    assert reported_exceptions("except ValueError:\n    pass\n") == set()


FAILING_TESTS = """
def check(expected, result):
    print("Expected:", expected)
    assert expected == result


def test_pipe():
    expected = "|:---|---:|"
    result = "|:---|----:|"
    check(expected, result)


def test_parse():
    assert int("4x") == 4
"""


def test_the_feedback_of_a_failing_run_keeps_what_failed_and_the_values_not_the_tests_code(tmp_path: Path):
    (tmp_path / "test_table.py").write_text(FAILING_TESTS)
    log = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                         capture_output=True, text=True, cwd=tmp_path, check=False).stdout
    assert "def test_pipe():" in log and "Captured stdout" in log  # what pytest printed
    feedback = summarise_failures(log, 4000)
    lines = feedback.split("\n")
    assert "test_pipe:" in lines and "test_parse:" in lines
    assert any(line.startswith(">") and "check(expected, result)" in line for line in lines)
    assert "expected = '|:---|---:|'" in feedback and "result = '|:---|----:|'" in feedback  # the call's values
    assert any(line.startswith("E ") and "invalid literal for int()" in line for line in lines)
    assert any(line.startswith("test_table.py:") for line in lines)
    assert any(line.startswith("FAILED test_table.py::test_pipe") for line in lines)
    # the tests' own code and what they printed are left out
    assert "def test_pipe():" not in feedback and 'result = "|:---|----:|"' not in feedback
    assert "Expected: |:---|---:|" not in feedback


def test_a_reports_own_failures_come_first_and_the_runs_output_does_not_repeat_them(tmp_path: Path):
    """The report's tests ran alone (theirs), then the whole suite (which includes them) ran: each failure is
    shown once, the report's first, the suite's other failures after it."""
    (tmp_path / "test_table.py").write_text(FAILING_TESTS)

    def pytest_log(*ids: str) -> str:
        args = [f"{tmp_path / 'test_table.py'}::{i}" for i in ids] or [str(tmp_path)]
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                              capture_output=True, text=True, cwd=tmp_path, check=False).stdout

    suite = summarise_failures(pytest_log(), 4000)
    feedback = failures_first(pytest_log("test_parse"), suite)
    lines = feedback.split("\n")
    assert lines[0] == "test_parse:" and lines.count("test_parse:") == 1
    assert "test_pipe:" in lines[1:]  # the suite's other failure is kept, after the report's
    assert lines.index("test_pipe:") > max(i for i, line in enumerate(lines) if "invalid literal" in line)
    theirs = summarise_failures(pytest_log("test_parse"), 2000).split("\n")
    assert all(lines.count(line) == 1 for line in theirs)  # none of the report's lines is shown again


def test_a_reproduction_runs_the_issues_own_case():
    """Scripts that share no string value with the issue's code test something else; an issue without values
    in its code leaves every script to the run."""
    copied = 'from inikit import Config\ncfg = Config({"s": {"n": "eight"}})\nassert cfg.getint("s", "n") == 8\n'
    why = why_not_the_reported_case(copied, INIKIT_2)
    assert why is not None and "'maybe'" in why
    own = 'from inikit import Config\ncfg = Config({"server": {"debug": "maybe"}})\ncfg.getbool("server", "debug")\n'
    assert why_not_the_reported_case(own, INIKIT_2) is None
    # a value of three characters or more inside a longer string (an INI text) counts as the issue's case
    ini = 'from inikit import loads\ncfg = loads("[server]\\ndebug = maybe\\n")\ncfg.getbool("server", "debug")\n'
    assert why_not_the_reported_case(ini, INIKIT_2) is None
    assert issue_values(ISSUE) == set() and why_not_the_reported_case(copied, ISSUE) is None
    assert why_not_the_reported_case("x = (", INIKIT_2) is None  # running a broken script says what is wrong


def test_an_exception_named_without_error_in_its_name_is_read_from_the_traceback():
    """pathroute's `NotFound`: the exception line is the first at column 0 after the last frame, whatever the
    class is called (such scripts were refused as failing 'with an error the issue does not describe')."""
    issue = 'router.add("/tags/<name>", "tag")\nrouter.match("GET", router.url_for("tag", name="c/c++"))  # NotFound'
    output = ("Traceback (most recent call last):\n" + SCRIPT + '  File "/workspace/pathroute/router.py", line 43, in match\n'
              "    raise NotFound(path)\n    ^^^^^^^^^^^^^^^^^^^^\npathroute.errors.NotFound: /tags/c/c++\n")
    assert why_not_a_bug(output, issue) is None
    elsewhere = output.replace("NotFound: /tags", "BuildError: /tags")
    why = why_not_a_bug(elsewhere, issue)
    assert why is not None and "pathroute.errors.BuildError" in why


def test_an_assertion_counts_only_with_the_error_the_issue_reports_raised():
    """cachette-2 reports ZeroDivisionError; a kept script asserting an LRU eviction order failed on every
    candidate, the fix included, and the vote chose a non-fix."""
    issue = ("Reading stats of an unused cache crashes\n\n```\nZeroDivisionError: division by zero\n```\n")
    other = "Traceback (most recent call last):\n" + SCRIPT + "AssertionError\n"
    why = why_not_a_bug(other, issue)
    assert why is not None and "ZeroDivisionError" in why
    caught = "Traceback (most recent call last):\n" + SCRIPT + "AssertionError: ZeroDivisionError raised\n"
    assert why_not_a_bug(caught, issue) is None
    assert why_not_a_bug(other, "hit_rate is wrong") is None  # an issue that shows no error raised
