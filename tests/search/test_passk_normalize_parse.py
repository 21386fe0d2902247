"""pass@k estimator, output normalisation for votes, and parsing of real pytest output."""

from __future__ import annotations

import itertools
import subprocess
import sys
from math import comb
from pathlib import Path

import pytest

from agentflow.search import normalise_output, parse_junit_xml, parse_pytest_summary, pass_at_k, pass_at_ks


@pytest.mark.parametrize("n,c,k", [(5, 0, 1), (5, 1, 1), (5, 2, 3), (10, 3, 4), (7, 7, 2), (6, 5, 2), (20, 1, 20)])
def test_pass_at_k_matches_the_combinatorial_definition(n: int, c: int, k: int) -> None:
    expected = 1 - comb(n - c, k) / comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_equals_the_share_of_k_subsets_that_hold_a_correct_sample() -> None:
    samples = [True, False, False, True, False, False]
    for k in range(1, len(samples) + 1):
        subsets = list(itertools.combinations(samples, k))
        share = sum(any(s) for s in subsets) / len(subsets)
        assert pass_at_k(len(samples), sum(samples), k) == pytest.approx(share)


def test_pass_at_ks_picks_powers_of_two_and_n() -> None:
    assert list(pass_at_ks(10, 2)) == [1, 2, 4, 8, 10]
    assert pass_at_ks(10, 2)[1] == pytest.approx(0.2)
    assert pass_at_ks(0, 0) == {}
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_python_outputs_equal_up_to_formatting_vote_together() -> None:
    a = "def f(x):\n    return x + 1  # add one\n"
    b = "def f(x): return (x+1)\n"
    c = "def f(x):\n    return x + 2\n"
    assert normalise_output(a) == normalise_output(b)
    assert normalise_output(a) != normalise_output(c)


def test_patches_compare_by_the_ast_of_added_code() -> None:
    p1 = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n def f(x):\n-    return x\n+    return x+1\n"
    p2 = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n def f(x):\n-    return x\n+    return (x + 1)  # fixed\n"
    p3 = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n def f(x):\n-    return x\n+    return x-1\n"
    p4 = p1.replace("m.py", "n.py")
    assert normalise_output(p1) == normalise_output(p2)
    assert normalise_output(p1) != normalise_output(p3)
    assert normalise_output(p1) != normalise_output(p4)


def test_changed_file_contents_win_over_the_output_and_text_falls_back_to_whitespace() -> None:
    assert normalise_output("x", {"a.py": "y = 1\n"}) == normalise_output("z", {"a.py": "y=1"})
    assert normalise_output("the  answer is \n\n  42 ") == normalise_output("the answer is\n42")
    assert normalise_output("the answer is 42") != normalise_output("the answer is 43")


TEST_FILE = '''
import pytest

def test_ok():
    pass

def test_bad():
    assert 1 == 2

@pytest.mark.skip(reason="not today")
def test_skipped():
    pass

@pytest.mark.xfail
def test_expected_failure():
    assert 0

@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")

def test_error(broken):
    pass

@pytest.mark.parametrize("x", [1, "a b"])
def test_param(x):
    assert x == 1

class TestGroup:
    def test_method(self):
        pass
'''


@pytest.fixture(scope="module")
def pytest_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("proj")
    (root / "test_sample.py").write_text(TEST_FILE)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-q", "-p", "no:cacheprovider", "--junitxml=report.xml"],
        cwd=root, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 1, proc.stdout
    return proc.stdout, (Path(root) / "report.xml").read_text()


def test_parse_pytest_summary_of_real_output(pytest_run: tuple[str, str]) -> None:
    tests = parse_pytest_summary(pytest_run[0])
    assert tests["test_sample.py::test_ok"] == "passed"
    assert tests["test_sample.py::test_bad"] == "failed"
    assert tests["test_sample.py::test_expected_failure"] == "xfailed"
    assert tests["test_sample.py::test_error"] == "error"
    assert tests["test_sample.py::test_param[1]"] == "passed"
    assert tests["test_sample.py::test_param[a b]"] == "failed"
    assert tests["test_sample.py::TestGroup::test_method"] == "passed"
    assert [o for t, o in tests.items() if o == "skipped"] == ["skipped"]
    assert len(tests) == 8


def test_parse_junit_of_real_output(pytest_run: tuple[str, str]) -> None:
    tests = parse_junit_xml(pytest_run[1])
    assert tests["test_sample::test_ok"] == "passed"
    assert tests["test_sample::test_bad"] == "failed"
    assert tests["test_sample::test_skipped"] == "skipped"
    assert tests["test_sample::test_expected_failure"] == "xfailed"
    assert tests["test_sample::test_error"] == "error"
    assert tests["test_sample::test_param[a b]"] == "failed"
    assert tests["test_sample.TestGroup::test_method"] == "passed"
    with pytest.raises(ValueError):
        parse_junit_xml("not xml")


def test_a_teardown_error_after_a_pass_counts_as_error() -> None:
    out = "== short test summary info ==\nPASSED t.py::a\nERROR t.py::a - teardown\n"
    assert parse_pytest_summary(out) == {"t.py::a": "error"}
