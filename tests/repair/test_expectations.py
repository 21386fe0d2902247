"""The reproduction from the issue's examples: which examples can be checked, how the model's answer of what
they should give is read, and what the written script does when run (on the host here, on a module of the
test's own; in the repair it runs in the sandbox, see test_repair_e2e)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from agentflow.repair.locate.statement import issue_examples
from agentflow.repair.verify.expectations import (
    Expectation,
    TracedExample,
    checkable,
    expectation_script,
    read_expectations,
)

ISSUE = '''`interpose` puts the separator in front of the first element

```python
>>> from seqs import interpose, last
>>> print(list(interpose("a", [1, 2])))
['a', 1, 'a', 2]
>>> list(interpose("a", [1, 2, 3]))
['a', 1, 'a', 2, 'a', 3]
>>> last([])
Traceback (most recent call last):
IndexError: list index out of range
```

Expected `[1, 'a', 2, 'a', 3]`, and `last([])` should raise `ValueError` like `max([])` does.
'''

FIXED = '''
def interpose(sep, seq):
    out = []
    for i, x in enumerate(seq):
        if i:
            out.append(sep)
        out.append(x)
    return out


def last(seq):
    if not seq:
        raise ValueError("empty")
    return seq[-1]
'''

BUGGY = FIXED.replace("        if i:\n            out.append(sep)", "        out.append(sep)").replace(
    '    if not seq:\n        raise ValueError("empty")\n', "")


def test_only_examples_whose_last_line_is_a_value_and_not_a_print_can_be_checked():
    statements = issue_examples(ISSUE)
    assert statements[0] == "from seqs import interpose, last" and len(statements) == 4
    examples = checkable(statements, ["", "['a', 1, 'a', 2]", "['a', 1, 'a', 2, 'a', 3]", "raised IndexError: x"])
    assert [(e.number, e.source) for e in examples] == [(3, 'list(interpose("a", [1, 2, 3]))'), (4, "last([])")]


def test_the_answer_is_read_as_a_doctest_of_the_fixed_code_and_what_the_code_already_gives_is_not():
    examples = [TracedExample(3, 'f("a")', "['a', 1]"), TracedExample(4, "g()", "raised IndexError: x"), TracedExample(5, "h()", "1")]
    answer = (">>> f('a')\n[1, 'a',\n 2]\n\n>>> g()\nTraceback (most recent call last):\n  ...\n"
              "builtins.ValueError: empty\n>>> h()\n1\n>>> k()\n2\n")
    # found by their code (quotes and spacing aside); a literal may span lines; an error by its name
    assert read_expectations(answer, examples) == {3: Expectation(literal="[1, 'a',\n2]"),
                                                   4: Expectation(raises="ValueError")}
    # a value equal to the unchanged code's, the same error, words, a repr: nothing to check
    assert read_expectations('>>> f("a")\n[\'a\', 1]\n>>> g()\nIndexError: y\n>>> h()\n<H object>', examples) == {}
    assert read_expectations(">>> h()\nthe number two", examples) == {}
    assert read_expectations(">>> g()\nraises KeyError", examples) == {4: Expectation(raises="KeyError")}
    assert expectation_script(["f()"], {}, {}) is None
    # an example of several statements is found by its last line too
    block = [TracedExample(1, 'c = C(2)\nc.set("a", 1)\n"a" in c  # True!', "False")]
    assert read_expectations('>>> c = C(2)\n>>> c.set("a", 1)\n>>> "a" in c\nTrue', block) == {
        1: Expectation(literal="True")}


def _run(tmp_path: Path, module: str, script: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "seqs.py").write_text(module)
    (tmp_path / "check.py").write_text(script)
    return subprocess.run([sys.executable, "check.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          check=False)


def test_the_script_fails_on_the_buggy_code_naming_each_mismatch_and_passes_on_the_fixed_code(tmp_path: Path):
    statements = issue_examples(ISSUE)
    examples = checkable(statements, ["", "", "['a', 1, 'a', 2, 'a', 3]", "raised IndexError: list index out of range"])
    expected = read_expectations(">>> list(interpose('a', [1, 2, 3]))\n[1, 'a', 2, 'a', 3]\n>>> last([])\n"
                                 "Traceback (most recent call last):\nValueError: empty", examples)
    assert set(expected) == {3, 4}
    script = expectation_script(statements, {}, expected)
    assert script is not None
    buggy = _run(tmp_path, BUGGY, script)
    assert buggy.returncode != 0 and "AssertionError" in buggy.stderr
    assert "gives ['a', 1, 'a', 2, 'a', 3]; the issue expects [1, 'a', 2, 'a', 3]" in buggy.stderr
    # the error the example raised is in the output (a reproduction of a raised error must show it)
    assert "raised IndexError: list index out of range; the issue expects ValueError raised" in buggy.stderr
    fixed = _run(tmp_path, FIXED, script)
    assert fixed.returncode == 0, fixed.stderr
    assert "[1, 'a', 2]" in fixed.stdout  # the printed example still runs (inside try), its output as before


def test_names_the_examples_never_import_are_imported_from_the_module_that_defines_them(tmp_path: Path):
    statements = ["list(interpose(0, [1, 2]))"]
    script = expectation_script(statements, {"interpose": "seqs"}, {1: Expectation(literal="[1, 0, 2]")})
    assert script is not None and script.startswith("from seqs import interpose\n")
    assert _run(tmp_path, FIXED, script).returncode == 0
    assert _run(tmp_path, BUGGY, script).returncode != 0


def test_examples_that_called_no_repository_code_are_not_checked():
    """Examples using a name the issue never defines (a `router` it never builds) fail in themselves: no
    reproduction is built of them (a model call saved), nor when the spectrum did not run them."""
    from types import SimpleNamespace
    from typing import Any, cast

    from agentflow.repair.nodes import examples_to_check

    rt = cast(Any, SimpleNamespace(issue=ISSUE))
    shown = ["", "['a', 1, 'a', 2]", "['a', 1, 'a', 2, 'a', 3]", "raised IndexError: list index out of range"]
    ran = {"executed": [["seqs.py", "interpose"]], "shown": shown}
    assert [e.number for e in examples_to_check(rt, {"spectrum": ran})] == [3, 4]
    assert examples_to_check(rt, {"spectrum": {**ran, "executed": []}}) == []
    assert examples_to_check(rt, {"spectrum": {}}) == []
