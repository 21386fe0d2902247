"""Which reproduction scripts are kept: failures that look like the bug, not like the script's own mistakes; and
what a failing test log becomes as the next attempt's feedback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentflow.repair.workbench import summarise_failures, why_not_a_bug

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
