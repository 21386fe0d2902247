"""Line-level evidence inside the suspect functions (`agentflow.repair.locate.lines`): a second, targeted run
records which lines of the top suspects the failing and the passing tests execute, and the edit prompt marks the
few that stand out.

A real repository with a seeded bug (a wrong start in one branch of `paginate`) and a real pytest suite, run
in the local sandbox (and in Docker) through the workbench, as the `swe.spectrum` node runs it; the reports as a
hostile sandbox could write them; the prompt in both edit formats.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentflow.cli.main import run
from agentflow.repair.config import load_repair_config
from agentflow.repair.edit.steps import edit_prompt, read_edits
from agentflow.repair.locate.lines import TargetFunction, line_counts, line_targets, standout_lines
from agentflow.repair.locate.localize import RunEvidence
from agentflow.repair.locate.spectrum import (
    MARKER,
    FunctionIndex,
    evidence_from_json,
    read_example_run,
    read_spectrum,
)
from agentflow.repair.nodetypes.rollout import SweEditSettings
from agentflow.repair.verify.testshare import describe
from agentflow.repair.verify.workbench import Workbench
from agentflow.sandbox import open_sandbox
from agentflow.swe.evaluate import sandbox_python
from agentflow.swe.workspace import repo_task

from .conftest import read_jsonl, scripted_cassette

CORE = '''def paginate(items, page, per_page):
    """Items of page `page` (1-based; 0 or less is the first), `per_page` a page."""
    if per_page <= 0:
        raise ValueError("per_page must be positive")
    start = 0
    if page > 1:
        start = page * per_page
    return items[start:start + per_page]


def page_count(items, per_page):
    def rounded_up(n):
        return -(-n // per_page)
    return rounded_up(len(items))
'''
BUGGY_LINE = 7
"""`start = page * per_page`: should be `(page - 1) * per_page`."""
TESTS = '''import pytest

from pager.core import page_count, paginate

ITEMS = list(range(10))


def test_first_page():
    assert paginate(ITEMS, 1, 3) == [0, 1, 2]


def test_page_zero_is_the_first():
    assert paginate(ITEMS, 0, 3) == [0, 1, 2]


def test_empty():
    assert paginate([], 1, 3) == []


def test_bad_per_page():
    with pytest.raises(ValueError):
        paginate(ITEMS, 1, 0)


def test_past_the_end():
    assert paginate(ITEMS, 9, 3) == []


def test_second_page():
    assert paginate(ITEMS, 2, 3) == [3, 4, 5]


def test_last_page():
    assert paginate(ITEMS, 4, 3) == [9]


def test_count():
    assert page_count(ITEMS, 3) == 4
'''
ISSUE = """paginate returns the wrong page after the first one.

```python
from pager.core import paginate
print(paginate(list(range(10)), 2, 3))
```

prints `[6, 7, 8]`, expected `[3, 4, 5]`.
"""
FIX = ("pager/core.py\n<<<<<<< SEARCH\n        start = page * per_page\n=======\n        start = (page - 1) * per_page\n"
       ">>>>>>> REPLACE\nEND_EDITS")
SOURCES = {"pager/__init__.py": "", "pager/core.py": CORE, "tests/test_pager.py": TESTS}


def make_repo(root: Path, *, more_tests: str = "") -> Path:
    (root / "pager").mkdir(parents=True)
    (root / "tests").mkdir()
    for path, text in {**SOURCES, "tests/test_pager.py": TESTS + more_tests}.items():
        (root / path).write_text(text)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=root, check=True)
    return root


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request: pytest.FixtureRequest) -> tuple[str, list[str]]:
    if request.param == "docker":
        return "docker", [f"sandbox.image={request.getfixturevalue('docker_image')}"]
    return "local", []


async def _line_run(backend: tuple[str, list[str]], root: Path, *, pace: tuple[float, int] | None = None,
                    ) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """(function-level summary, line spectrum, test-time reports) of the repository at `root`, as the spectrum
    node gathers them; `pace`: the base run's (seconds, tests) planted, as the pre-flight would measure them."""
    name, settings = backend
    cfg = load_repair_config([f"backend={name}", *settings])
    reports: list[dict[str, Any]] = []
    async with open_sandbox(name, cfg.sandbox) as sandbox:
        bench = Workbench(sandbox, repo_task(root, ISSUE), cfg, sandbox_python(sandbox))
        bench.test_share.reporter = reports.append
        await bench.setup()
        assert (await bench.preflight()).can_run  # as a repair starts: the pace, the runner installed
        sources = await bench.python_sources()
        _, summary = await bench.gather_evidence(ISSUE, sources, test_timeout_s=120)
        if pace is not None:
            bench.test_share.measured(*pace)
        lines = await bench.line_evidence(ISSUE, sources, summary, functions=3, test_timeout_s=60)
    return summary, lines, reports


async def test_in_a_real_sandbox_the_buggy_line_is_the_one_marked(backend: tuple[str, list[str]],
                                                                  tmp_path: Path) -> None:
    """Both failing tests and the example run `start = page * per_page`; of the five passing tests that call
    `paginate` only one does (a page past the end, where the wrong start still gives []). Every other line the
    failing runs execute, most passing tests do too: the buggy line is the only one marked."""
    summary, lines, reports = await _line_run(backend, make_repo(tmp_path / "repo"))
    assert summary["suspicion"][0][:2] == ["pager/core.py", "paginate"], summary["suspicion"]
    assert lines["functions"][0] == ["pager/core.py", "paginate"], lines
    assert lines["tests"] == {"passed": 5, "failed": 2}, lines  # the failing tests and those reaching the suspects
    assert lines["failing_runs"] == 3  # the two failing tests and the issue's example
    assert [m[:4] for m in lines["marks"]] == [["pager/core.py", BUGGY_LINE, 3, 1]], lines
    assert lines["top"][0] == lines["marks"][0] and len(lines["top"]) == 5  # the lines the failing runs executed
    assert lines["problems"] == [] and reports == []
    evidence = evidence_from_json({**summary, "lines": lines})
    assert evidence.marks == {"pager/core.py": (BUGGY_LINE,)}


ORDER_DEPENDENT = '''

STATE = {}


def test_set_up():
    STATE["ready"] = True


def test_needs_the_set_up():
    assert STATE.get("ready") and paginate(ITEMS, 1, 3) == [0, 1, 2]
'''
"""A passing test that passes only after another test (which never calls `paginate`) has run."""


async def test_a_passing_test_that_fails_in_the_line_run_leaves_no_mark(tmp_path: Path) -> None:
    """The line-traced run takes only the tests reaching the suspects: a passing test relying on one left out
    fails there, and counted as failing it would make the lines it ran look suspect; the run says so instead
    of marking."""
    _, lines, _ = await _line_run(("local", []), make_repo(tmp_path / "repo", more_tests=ORDER_DEPENDENT))
    assert lines["tests"] == {"passed": 5, "failed": 3}, lines
    assert lines["marks"] == [] and lines["top"], lines
    assert lines["problems"] == [("1 of the tests that passed in the suite's run failed in this one (they may rely on "
                                 "tests not run): no line is marked")], lines


async def test_a_line_run_that_does_not_fit_the_test_time_is_shortened_or_skipped_and_says_so(
        tmp_path: Path) -> None:
    """A planted pace (the pre-flight's) at which the line-traced run of the two failing and five passing tests
    would not fit its allowance: first only some passing tests fit (the run is shortened), then none does (the
    run is skipped, the examples not run either); both are test-time reports, as the localization's are."""
    repo = make_repo(tmp_path / "repo")
    # 60 s allowance, 80% of it planned: start 0.1 x 60 x 2.5 = 15 s, then 135 s / 8 tests each -> 2 failing + 0.x
    _, lines, reports = await _line_run(("local", []), repo, pace=(60.0, 8))
    assert [(r["step"], r["action"]) for r in reports] == [("line spectrum", "skipped")], reports
    assert reports[0]["tests"] == 7 and "not one passing test fits" in lines["problems"][0], lines
    assert lines["marks"] == [] and lines["tests"] is None
    assert describe(reports[0]).startswith("tests: line spectrum skipped, its 7 tests do not fit (time limit 60s")

    _, lines, reports = await _line_run(("local", []), repo, pace=(24.0, 8))
    # start 6 s, 6.75 s a test: (48 - 6) / 6.75 = 6 tests fit -> the 2 failing and 4 of the 5 passing
    assert [(r["step"], r["action"], r["tests"], r["suite_tests"]) for r in reports] == [
        ("line spectrum", "shortened", 6, 7)], reports
    assert lines["tests"] == {"passed": 4, "failed": 2}, lines
    assert lines["problems"] == ["line-traced run shortened to 6 tests to fit the test time"], lines


def test_the_line_marks_setting_is_off_by_default_and_on_marks_the_buggy_line_in_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the command line with the local sandbox and a scripted answer: off by default (no line-traced
    run), `-c line_marks=true` marks the buggy line in the `repair.spectrum` event and in the coder's prompt;
    the fix is found either way."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "1")  # the prompts in the events
    repo = make_repo(tmp_path / "repo")
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 4)
    marked, prompts = {}, {}
    for on in (False, True):
        out = tmp_path / f"run-{on}"
        args = ["repair", str(repo), "--issue", ISSUE, "--model", f"replay:{cassette}", "--sandbox", "local",
                "-c", "edit.format=search_replace", "-c", "search.concurrency=1", "-c", "rank=false", "-o", str(out),
                "-c", "mutants=false", "--strategy", "best_of_n", "-n", "1", "--json"] + (["-c", "line_marks=true"] if on else [])
        assert run(args) == 0
        assert json.loads(capsys.readouterr().out)["report"]["resolved"] is True
        events = read_jsonl(out / "events.jsonl")
        marked[on] = next(e["data"]["marked"] for e in events if e.get("kind") == "repair.spectrum")
        prompts[on] = [str(m.get("content")) for e in events if e.get("kind") == "model.call"
                       for m in e["data"].get("messages") or [] if m.get("role") == "user"]
    assert marked == {False: [], True: [f"pager/core.py:{BUGGY_LINE}"]}
    gutter = f"*   {BUGGY_LINE}|         start = page * per_page"
    assert prompts[True] and all(gutter in p for p in prompts[True] if "SEARCH/REPLACE" in p), prompts[True]
    assert prompts[False] and not any(gutter in p for p in prompts[False])


# ------------------------------------------------------------------------------------------ hostile reports


def test_hostile_line_rows_outside_the_target_functions_are_dropped() -> None:
    """Rows naming other files, test files, lines outside any function, a function nested in a target, another
    function of the same file, malformed rows and counts above the run's own: none of them counts."""
    sources = {**SOURCES, "pager/other.py": "def helper():\n    return 1\n"}
    index = FunctionIndex(sources)
    report = {"tests": {"passed": 5, "failed": 2}, "ids": None, "functions": [], "lines": [
        ["pager/core.py", BUGGY_LINE, 1, 2],
        ["pager/core.py", 8, 10**9, 10**9],  # counts above the run's: bounded by it
        ["pager/core.py", 9, 0, 2],  # a blank line between functions: no function's
        ["pager/core.py", 500, 0, 2],  # past the end of the file
        ["pager/core.py", 13, 0, 2],  # `rounded_up`, nested in page_count (a target): its own code
        ["pager/core.py", 14, 0, 2],  # page_count: not a target
        ["pager/other.py", 2, 0, 2], ["tests/test_pager.py", 9, 0, 2], ["/etc/passwd", 1, 0, 2],
        ["pager/core.py", "7", 0, 2], ["pager/core.py", 7, 0], "row", None,
    ]}
    suite = read_spectrum(json.dumps(report), index)
    assert suite is not None and suite.lines is not None
    assert set(suite.lines) == {("pager/core.py", n) for n in (BUGGY_LINE, 8, 13, 14)} | {("pager/other.py", 2)}
    assert suite.lines[("pager/core.py", 8)] == (5, 2)
    targets = [TargetFunction("pager/core.py", "paginate", 1, 8), TargetFunction("pager/core.py", "page_count", 11, 14)]
    failing, counts = line_counts(targets[:1], index, suite, None)
    assert failing == 2 and set(counts) == {("pager/core.py", BUGGY_LINE), ("pager/core.py", 8)}
    _, counts = line_counts(targets[1:], index, suite, None)
    assert set(counts) == {("pager/core.py", 14)}  # not the nested function's line 13

    # a report past its size is not read; the examples' rows are kept only inside repository functions
    assert read_spectrum(json.dumps({**report, "pad": "x" * 4_000_001}), index) is None
    examples = read_example_run(MARKER + json.dumps({"calls": [["pager/core.py", "paginate", 1, 0, 1]], "errors": [],
                                                     "shown": ["[6, 7, 8]\n"], "lines": [
        ["pager/core.py", BUGGY_LINE], ["pager/core.py", 9], ["tests/test_pager.py", 9], ["x", "y"], 5]}), index, 2)
    assert examples.lines == {("pager/core.py", BUGGY_LINE)}


def test_the_targets_are_the_most_suspect_functions_and_those_tied_with_the_last_in_file_order() -> None:
    sources = {"m.py": "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(8)), "tests/test_m.py": "def test_x():\n    pass\n"}
    # the suite's report gives ties in no particular order: the targets do not depend on it
    suspicion = [["m.py", "f5", 0.5], ["tests/test_m.py", "test_x", 0.9], ["m.py", "f3", 0.7], ["m.py", "f1", 0.5],
                 ["m.py", "f0", 0.9], ["m.py", "f4", 0.5], ["m.py", "nowhere", 0.9]]
    assert [t.qualname for t in line_targets(suspicion, sources, 2)] == ["f0", "f3"]
    assert [t.qualname for t in line_targets(suspicion, sources, 3)] == ["f0", "f3", "f1", "f4", "f5"]
    many = [["m.py", f"f{i}", 0.5] for i in reversed(range(8))]
    assert [t.qualname for t in line_targets(many, sources, 3)] == [f"f{i}" for i in range(6)]  # twice `top` at most


def test_a_line_stands_out_only_when_every_failing_run_and_few_passing_tests_run_it() -> None:
    index = FunctionIndex(SOURCES)
    targets = line_targets([["pager/core.py", "paginate", 0.8], ["tests/test_pager.py", "test_empty", 0.5]],
                           SOURCES, 3)
    assert targets == [TargetFunction("pager/core.py", "paginate", 1, 8)]  # a test's function is no target
    base = {3: (5, 2), 5: (4, 2), 6: (4, 2), 8: (4, 2)}

    def marks(lines: dict[int, tuple[int, int]]) -> list[int]:
        counts = {("pager/core.py", n): pf for n, pf in lines.items()}
        return [m.line for m in standout_lines(targets, index, 2, counts)]

    assert marks({**base, 7: (1, 2)}) == [7]
    assert marks({**base, 7: (3, 2)}) == []  # three of five passing tests run it: not few
    assert marks({**base, 7: (1, 1)}) == []  # one failing test does not run it
    assert marks({n: (0, 2) for n in (3, 5, 6, 7, 8)}) == []  # no passing test reaches it: nothing to compare
    assert marks({**base, 4: (0, 2), 7: (0, 2)}) == [4, 7]  # two lines share the top score: both
    many = {**base, **{n: (0, 2) for n in (2, 4, 7, 8)}}
    assert marks(many) == []  # more than three share it: a block, not a line

    # over several functions: three at most, those of the more suspect function first among equal ones
    both = [*targets, TargetFunction("pager/core.py", "page_count", 11, 14)]
    counts = {("pager/core.py", n): pf for n, pf in {3: (5, 2), 4: (0, 2), 7: (0, 2), 11: (4, 2), 14: (0, 2)}.items()}
    assert [m.line for m in standout_lines(both, index, 2, counts)] == [4, 7, 14]
    counts[("pager/core.py", 6)] = (0, 2)
    assert [m.line for m in standout_lines(both, index, 2, counts)] == [4, 6, 7]
    assert [m.line for m in standout_lines(both[::-1], index, 2, counts)] == [14, 4, 6]


# ------------------------------------------------------------------------------------------ the edit prompt


def test_the_edit_prompt_marks_the_lines_in_the_gutter_and_a_copied_search_text_still_matches() -> None:
    evidence = RunEvidence(suspicion={("pager/core.py", "paginate"): 0.8},
                           marks={"pager/core.py": (BUGGY_LINE,)})
    issue = ISSUE
    replace = edit_prompt(SweEditSettings(edit_format="search_replace"), SOURCES, issue, "", evidence=evidence)
    assert f"*   {BUGGY_LINE}|         start = page * per_page" in replace.user
    assert "    6|     if page > 1:" in replace.user  # the other lines keep their gutter, aligned
    assert "the * is not part of the file" in replace.user
    # a model copying the marked lines with their gutter still gives a SEARCH text that matches the file
    answer = ("pager/core.py\n<<<<<<< SEARCH\n    6|     if page > 1:\n*   7|         start = page * per_page\n"
              "=======\n    if page > 1:\n        start = (page - 1) * per_page\n>>>>>>> REPLACE\nEND_EDITS")
    edits = read_edits(answer, SOURCES, "pager/core.py", complete=True)
    assert edits.status == "ok" and edits.files["pager/core.py"] == CORE.replace(
        "start = page * per_page", "start = (page - 1) * per_page"), edits

    plain = edit_prompt(SweEditSettings(edit_format="search_replace"), SOURCES, issue, "",
                        evidence=RunEvidence(suspicion=evidence.suspicion))
    assert f"\n   {BUGGY_LINE}| " in plain.user and not re.search(r"\*\s*\d+\|", plain.user)  # no marks: as before
    assert "\n   1| def paginate" in plain.user and "\n    1| def paginate" in replace.user  # one more column

    rewrite = edit_prompt(SweEditSettings(edit_format="rewrite"), SOURCES, issue, "", evidence=evidence)
    assert rewrite.window is not None and rewrite.window.symbol == "paginate"
    assert rewrite.snippet == CORE.split("\n\n\n")[0]  # the code the model gives back, as the file has it
    after_code = rewrite.user.split(rewrite.snippet, 1)[1]
    assert after_code.startswith("\n```\nEvery failing test runs `start = page * per_page`, and few passing tests"), after_code
    unmarked = edit_prompt(SweEditSettings(edit_format="rewrite"), SOURCES, issue, "",
                           evidence=RunEvidence(suspicion=evidence.suspicion))
    assert "Every failing test" not in unmarked.user
