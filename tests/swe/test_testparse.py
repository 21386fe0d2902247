"""Per-test outcomes read from real pytest output: the `-rA` summary lines."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentflow.swe.testparse import parse_pytest_summary

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
def pytest_run(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("proj")
    (root / "test_sample.py").write_text(TEST_FILE)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-q", "-p", "no:cacheprovider"],
        cwd=root, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 1, proc.stdout
    return proc.stdout


def test_parse_pytest_summary_of_real_output(pytest_run: str) -> None:
    tests = parse_pytest_summary(pytest_run)
    assert tests["test_sample.py::test_ok"] == "passed"
    assert tests["test_sample.py::test_bad"] == "failed"
    assert tests["test_sample.py::test_expected_failure"] == "xfailed"
    assert tests["test_sample.py::test_error"] == "error"
    assert tests["test_sample.py::test_param[1]"] == "passed"
    assert tests["test_sample.py::test_param[a b]"] == "failed"
    assert tests["test_sample.py::TestGroup::test_method"] == "passed"
    assert [o for t, o in tests.items() if o == "skipped"] == ["skipped"]
    assert len(tests) == 8


def test_a_teardown_error_after_a_pass_counts_as_error() -> None:
    out = "== short test summary info ==\nPASSED t.py::a\nERROR t.py::a - teardown\n"
    assert parse_pytest_summary(out) == {"t.py::a": "error"}
