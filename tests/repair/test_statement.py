"""A problem statement read once (`locate.statement.read_statement`), and a failing-test report as a first-class
input of the repair: its frames rank the suspects, its named tests are the reproduction (run, not written), and
the edit's feedback leads with their output. Statements are written by synth's own writer from pytest really run
on a small generated repository, over each of its failures."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentflow.cli.main import run
from agentflow.repair.edit.steps import issue_text
from agentflow.repair.locate.localize import rank_windows
from agentflow.repair.locate.statement import Frame, read_statement
from agentflow.synth.statement import behaviour_report, failing_test_code, failing_test_report, read_failure

from .conftest import read_jsonl, scripted_cassette

PRICES = '''"""Prices in cents."""


def to_cents(text):
    whole, _, frac = text.partition(".")
    return int(whole) * 100 + int((frac + "00")[:1])


def order_total(lines):
    return sum(to_cents(price) * qty for price, qty in lines)


def _rate(percent):
    return percent / (100 - percent * 10)


def discount(cents, percent):
    """The price less `percent` percent: discount(1000, 10) is 900."""
    if percent == 0:
        return cents
    return cents - int(cents * _rate(percent))
'''

TESTS = '''import pytest

from shop.prices import discount, order_total, to_cents


def test_cents():
    assert to_cents("1.25") == 125


class TestOrder:
    def test_total(self):
        assert order_total([("1.25", 2), ("0.50", 1)]) == 300


@pytest.mark.parametrize("percent,expected", [(10, 900), (20, 800)])
def test_discount(percent, expected):
    assert discount(1000, 0) == 1000
    assert discount(1000, percent) == expected


def test_whole_units():
    assert to_cents("3") == 300
'''

TEST_FILE = "tests/test_prices.py"
FAILING = ["tests/test_prices.py::test_cents", "tests/test_prices.py::TestOrder::test_total",
           "tests/test_prices.py::test_discount[10-900]", "tests/test_prices.py::test_discount[20-800]"]


def make_repo(root: Path, prices: str = PRICES, **more_tests: str) -> Path:
    """Package `shop` and its tests (`more_tests`: other test files by name), committed with git."""
    (root / "shop").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "shop" / "__init__.py").write_text("")
    (root / "shop" / "prices.py").write_text(prices)
    (root / TEST_FILE).write_text(TESTS)
    for name, text in more_tests.items():
        (root / "tests" / f"{name}.py").write_text(text)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=root, check=True)
    return root


def pytest_output(root: Path, *args: str) -> str:
    """pytest's output as CI prints it (`--tb=short`, the failures' summary lines)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "--tb=short",
                           "-rf", "--color=no", *args], cwd=root, capture_output=True, text=True, timeout=120, check=False,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    return done.stdout


def sources_of(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in root.rglob("*.py") if ".git" not in p.parts}


def report_for(root: Path, output: str, first: str, failing: list[str], shown: set[str] | None = None) -> str:
    """synth's failing-test report with `first` as the shown failure; `shown`: the files whose frames it keeps
    (synth keeps the test files' only)."""
    failure = read_failure(first, output, shown or {TEST_FILE})
    assert failure is not None
    return failing_test_report([failure], failing_test_code((root / TEST_FILE).read_text(), first),
                               [first, *(t for t in failing if t != first)])


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = make_repo(tmp_path_factory.mktemp("shop"))
    output = pytest_output(root)
    assert re.findall(r"^FAILED (\S+)", output, re.MULTILINE) == [f"{t}" for t in FAILING]
    return root, output


@pytest.mark.parametrize("first", FAILING)
def test_a_failing_test_report_reads_back_as_its_tests_frames_and_assertion(shop: tuple[Path, str], first: str):
    root, output = shop
    failure = read_failure(first, output, {TEST_FILE})
    assert failure is not None
    read = read_statement(report_for(root, output, first, FAILING))
    assert read.kind == "failing_tests" and read.examples == ()  # the test's code is not an example to run
    assert read.failing_tests == (first, *(t for t in FAILING if t != first))
    assert read.tests_in(sources_of(root)) == list(read.failing_tests)
    test_name = first.split("::")[-1].split("[")[0]
    assert read.frames and all(f.path == TEST_FILE and f.function == test_name for f in read.frames)
    assert read.assertion == "\n".join(line[1:].strip() for line in failure.error).strip()
    assert read.assertion.startswith(("AssertionError", "assert", "ZeroDivisionError"))


def test_a_behaviour_report_names_its_test_and_ci_output_its_package_frames(shop: tuple[Path, str]):
    root, output = shop
    failure = read_failure(FAILING[0], output, {TEST_FILE})
    assert failure is not None
    behaviour = behaviour_report(failure)
    assert behaviour is not None and read_statement(behaviour).failing_tests == (FAILING[0],)
    # pytest's own output, package frames and all: the deepest frame of the division is `_rate`
    raw = read_statement(output)
    assert raw.kind == "failing_tests" and set(raw.failing_tests) == set(FAILING)
    package = [f for f in raw.frames if f.path == "shop/prices.py"]
    assert [f.function for f in package[:2]] == ["discount", "_rate"]
    assert read_statement("The tests `tests/test_prices.py::test_gone` fail").tests_in(sources_of(root)) == []


def test_a_users_traceback_and_examples_are_the_other_kinds(shop: tuple[Path, str]):
    root, _ = shop
    done = subprocess.run([sys.executable, "-c", "from shop.prices import discount; discount(1000, 10)"], cwd=root,
                          capture_output=True, text=True, check=False,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    prose = read_statement(f"Discounts crash:\n\n```\n{done.stderr}```\n")
    assert prose.kind == "prose" and prose.failing_tests == ()
    assert prose.assertion == "ZeroDivisionError: division by zero"
    assert [(f.path.endswith("shop/prices.py"), f.function) for f in prose.frames][-2:] == [
        (True, "discount"), (True, "_rate")]
    examples = read_statement("`discount` crashes:\n\n>>> discount(1000, 10)\nZeroDivisionError\n")
    assert examples.kind == "examples" and examples.examples == ("discount(1000, 10)",)
    assert read_statement("Discounts are wrong for ten percent.").kind == "prose"


def test_the_reports_frames_rank_the_deepest_package_function_first(shop: tuple[Path, str]):
    """A report as CI prints it, package frames kept: its frames mark their functions, the deepest first."""
    root, output = shop
    report = report_for(root, output, FAILING[2], FAILING, {TEST_FILE, "shop/prices.py"})
    line = PRICES.split("\n").index("    return percent / (100 - percent * 10)") + 1
    assert read_statement(report).frames[-1] == Frame("shop/prices.py", line, "_rate")
    windows = rank_windows(sources_of(root), report, limit=3)
    assert [(w.symbol, w.frame) for w in windows[:2]] == [("_rate", True), ("discount", True)]


@pytest.mark.parametrize("first", FAILING)
def test_a_report_cut_to_fit_the_prompts_keeps_its_assertion_output(shop: tuple[Path, str], first: str):
    root, output = shop
    report = report_for(root, output, first, FAILING, {TEST_FILE, "shop/prices.py"})
    assertion = read_statement(report).assertion
    limit = report.index(assertion.split("\n")[0]) - 40  # the cut falls before the `E` lines
    shown = issue_text(report, limit=limit)
    assert assertion in shown and len(shown) <= limit + len("\n...\n\n...")
    assert shown.startswith(report[:100])  # the failing tests listed first are kept
    assert issue_text("A long report. " * 200, limit=100) == ("A long report. " * 200)[:100] + "\n..."


UNRELATED = '''def test_locale():
    assert "C" == "en_US", "the locale test fails on this machine whatever the code"
'''

FIX = '''shop/prices.py
<<<<<<< SEARCH
    return percent / (100 - percent * 10)
=======
    return percent / 100
>>>>>>> REPLACE
END_EDITS'''


def test_a_repair_of_a_failing_test_report_runs_its_tests_as_the_reproduction(tmp_path: Path):
    """Blind mode, local sandbox, one scripted edit: the report's tests are the reproduction (no script asked
    for), the deepest frame's function is the first suspect, and the edit's feedback leads with the named tests'
    output although another test, unrelated, fails first."""
    root = make_repo(tmp_path / "repo", PRICES.replace('[:1]', '[:2]'), test_env=UNRELATED)
    named = FAILING[2:]
    report = report_for(root, pytest_output(root), named[0], named, {TEST_FILE, "shop/prices.py"})
    cassette = scripted_cassette(tmp_path / "c.json", [FIX])
    out = tmp_path / "run"
    run(["repair", str(root), "--issue", report, "--sandbox", "local", "--model", f"replay:{cassette}",
         "--strategy", "best_of_n", "-n", "1", "-c", "search.max_attempts=1", "-c", "edit.format=search_replace",
         "-c", "search.concurrency=1", "-c", "rank=false", "-o", str(out)])
    events = read_jsonl(out / "events.jsonl")
    (repro,) = [e["data"] for e in events if e["kind"] == "repair.reproduce"]
    assert (repro["source"], repro["kept"], repro["tests"], repro["script"]) == ("tests", True, named, None)
    (base,) = [e["data"] for e in events if e["kind"] == "repair.base"]
    assert base["reproduced"] is True and base["suspects"][0] == "shop/prices.py:_rate"
    (turn,) = [e["data"] for e in events if e["kind"] == "model.turn"]  # the edit: no reproduction script asked for
    feedback = turn["messages"][-1]["content"].split("Test results of the current code:", 1)[1]
    assert 0 <= feedback.index("ZeroDivisionError") < feedback.index("test_locale")
    (cand,) = read_jsonl(out / "candidates.jsonl")
    shown = cand["verification"]
    assert shown["reproduced"] is False and shown["passed"] is False  # the unrelated test still fails
    assert "test_discount" not in shown["output"] and "test_locale" in shown["output"]
    assert json.loads((out / "instances" / "repo" / "outcome.json").read_text())["reproduced"] is True


def test_the_failure_a_report_shows_is_read_with_the_statement(shop: tuple[Path, str]):
    """The one reader keeps the report's failure output as printed: pytest's `E` lines with their locations, or the
    last traceback to its exception line (what a retry's prompt shows, `steps.failure_report`)."""
    root, output = shop
    report = report_for(root, output, FAILING[0], FAILING)
    failure = read_statement(report).failure
    assert failure and all(line.startswith("E ") or re.match(r"\S+\.py:\d+: ", line) for line in failure.splitlines())
    assert read_statement(report).assertion.split("\n")[0] in failure
    traceback = 'Traceback (most recent call last):\n  File "m.py", line 1, in f\nKeyError: \'x\''
    assert read_statement(f"Words.\n{traceback}\nMore words.").failure == traceback
    assert read_statement("No failure here.").failure == ""
