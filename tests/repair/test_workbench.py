"""Which reproduction scripts are kept: failures that look like the bug, not like the script's own mistakes."""

from __future__ import annotations

import pytest

from agentflow.swe.workbench import _fails_like_a_bug

SCRIPT = '  File "/workspace/.agentflow_eval/reproduce_issue.py", line 4, in <module>\n'
LIBRARY = '  File "/workspace/cachette/stats.py", line 19, in hit_rate\n'


@pytest.mark.parametrize(
    ("output", "kept"),
    [
        ("Traceback (most recent call last):\n" + SCRIPT + "AssertionError: 'a' != 'a=b'\n", True),
        ("Traceback (most recent call last):\n" + SCRIPT + LIBRARY + "ZeroDivisionError: division by zero\n", True),
        ("Traceback (most recent call last):\n" + SCRIPT + "AttributeError: 'Config' has no attribute 'x'\n", False),
        ("Traceback (most recent call last):\n" + SCRIPT + "ModuleNotFoundError: No module named 'inikit'\n", False),
        ('  File "reproduce_issue.py", line 2\n    x = (\nSyntaxError: unexpected EOF\n', False),
        ("killed\n", False),
    ],
)
def test_reproduction_failures_that_count(output: str, kept: bool):
    assert _fails_like_a_bug(output) is kept
