"""Which reproduction scripts are kept: failures that look like the bug, not like the script's own mistakes."""

from __future__ import annotations

import pytest

from agentflow.repair.workbench import why_not_a_bug

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
