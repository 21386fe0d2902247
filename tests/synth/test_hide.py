"""Cutting hidden tests from their files (`synth.hide`) and the user's report that stands in for them."""

from __future__ import annotations

import ast
import subprocess
import sys

from agentflow.synth.hide import cut_functions, hidden_functions, is_hidden, snippet_of
from agentflow.synth.statement import Failure, behaviour_report, user_report

TESTS = '''\
import pytest


def helper():
    return 1


@pytest.mark.parametrize("x", [1, 2])
def test_param(x):
    assert x


def test_kept():
    assert helper() == 1


class TestBox:
    def test_a(self):
        """What it checks."""
        assert True

    def test_b(self):
        assert True


class TestAlone:
    @pytest.mark.slow
    def test_only(self):
        assert True
'''


def _defined(text: str) -> set[str]:
    return {n.name for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef)}


def test_ids_map_to_one_function_each() -> None:
    ids = ["t.py::test_param[1]", "t.py::test_param[2]", "t.py::TestBox::test_a", "u.py::test_x"]
    hidden = hidden_functions(ids)
    assert hidden == {"t.py": [("TestBox", "test_a"), ("test_param",)], "u.py": [("test_x",)]}
    assert is_hidden("t.py::test_param[3]", hidden) and not is_hidden("t.py::test_kept", hidden)
    assert not is_hidden("t.py::TestBox::test_b", hidden)


def test_cut_removes_the_functions_with_their_decorators() -> None:
    cut = cut_functions(TESTS, [("test_param",), ("TestBox", "test_a")])
    assert cut is not None
    assert _defined(cut) == {"helper", "test_kept", "test_b", "test_only"}
    assert "parametrize" not in cut and "import pytest" in cut


def test_a_class_left_empty_still_imports() -> None:
    cut = cut_functions(TESTS, [("TestAlone", "test_only")])
    assert cut is not None and "slow" not in cut
    tree = ast.parse(cut)
    alone = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TestAlone")
    assert [type(s) for s in alone.body] == [ast.Pass]


def test_a_test_not_defined_in_its_file_cannot_be_cut() -> None:
    assert cut_functions(TESTS, [("TestBox", "test_inherited")]) is None
    assert cut_functions(TESTS, [("test_missing",)]) is None


def test_the_snippet_is_the_body_without_the_def_line() -> None:
    assert snippet_of(TESTS, "t.py::TestBox::test_b") == "assert True"
    assert snippet_of(TESTS, "t.py::TestBox::test_a") == "assert True"
    assert snippet_of(TESTS, "t.py::test_param[2]") == "assert x"
    assert snippet_of(TESTS, "t.py::nope") == ""


def test_the_user_report_names_no_test() -> None:
    frames = ["tests/test_m.py:4: in test_f", "    assert f(2) == 3", "<frozen codecs>:1: in decode", "    ???",
              "E   assert 4 == 3"]
    failure = Failure("tests/test_m.py::test_f", frames, "assert f(2) == 3", ["E   assert 4 == 3"])
    report = user_report(failure, "x = 2\nassert f(x) == 3", others=1)
    assert "test_f" not in report and "tests/test_m.py" not in report and "frozen" not in report and "???" not in report
    assert report.startswith("Unexpected `assert 4 == 3`")
    assert "assert f(x) == 3" in report and "E   assert 4 == 3" in report and "similar cases" in report
    behaviour = behaviour_report(failure, cite_test=False)
    assert behaviour is not None and "test_f" not in behaviour and "`f(2)` gives `4`" in behaviour


def test_the_command_offers_hide_tests() -> None:
    proc = subprocess.run([sys.executable, "-m", "agentflow.cli.main", "tasks", "synth", "--help"],
                          capture_output=True, text=True, timeout=120, check=True, env={"COLUMNS": "200", "PATH": ""})
    assert "--hide-tests" in proc.stdout and "test_patch" in proc.stdout
