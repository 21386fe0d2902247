"""Test time spent on the fix: a candidate runs the tests that reach what it changed (as the base commit's traced
run recorded), losers stop there, finalists run the whole suite before they are chosen, and a run times out at
a multiple of the unchanged code's. Pure parts, the plugin under a real pytest, and a real Docker sandbox."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import pytest

from agentflow.budget import Budget
from agentflow.events import EventLog
from agentflow.repair.locate.spectrum import FunctionIndex, reach_summary, read_spectrum
from agentflow.repair.verify.choose import ChooseSettings, choose
from agentflow.repair.verify.targeting import (
    SuiteReach,
    changed_functions,
    estimate,
    targeted_command,
    timeout_from_base,
)
from agentflow.repair.verify.workbench import HowToVerify, Workbench
from tests.repair.conftest import run_with_spectrum_plugin, verified

CORE = '''def paginate(items, page, per_page):
    start = page * per_page
    return items[start:start + per_page]


def page_count(n, per_page):
    return -(-n // per_page)


def label(page):
    return f"page {page}"


DEFAULT_LABEL = label(1)
''' + "\n".join(f"# {'a long file, longer than what a command may print: ' * 2}{i}" for i in range(800)) + "\n"
TESTS = {
    "tests/test_pager.py": "from pager.core import paginate\n\n\ndef test_first_page():\n"
                           "    assert paginate(list(range(10)), 1, 3) == [0, 1, 2]\n\n\n"
                           "def test_empty():\n    assert paginate([], 1, 3) == []\n",
    "tests/test_count.py": "from pager.core import page_count\n\n\ndef test_exact():\n    assert page_count(6, 3) == 2\n\n\n"
                           "def test_rest():\n    assert page_count(7, 3) == 3\n\n\n"
                           "def test_none():\n    assert page_count(0, 3) == 0\n",
    # DEFAULT_LABEL is computed at import: no test calls label() for it, so no trace links them
    "tests/test_label.py": "from pager.core import DEFAULT_LABEL, label\n\n\ndef test_default_label():\n"
                           "    assert DEFAULT_LABEL == 'page 1'\n\n\n"
                           "def test_label():\n    assert label(2) == 'page 2'\n",
}


def _diff(path: str, old: str, new: str) -> str:
    import difflib

    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}")
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


FIX = _diff("pager/core.py", CORE, CORE.replace("start = page * per_page", "start = (page - 1) * per_page"))
BREAK_COUNT = _diff("pager/core.py", CORE, CORE.replace("return -(-n // per_page)", "return n // per_page"))
# fixes the bug, and changes what label(1) says, which only the import-time constant shows
SNEAKY = _diff("pager/core.py", CORE, CORE.replace("start = page * per_page", "start = (page - 1) * per_page")
               .replace('return f"page {page}"', 'return f"page {page}" if page != 1 else "first page"'))
HANG = _diff("pager/core.py", CORE, CORE.replace("start = page * per_page", "while True:\n        pass"))
MODULE_LEVEL = _diff("pager/core.py", CORE, CORE + "\nPAGE_SIZES = (10, 20)\n")


# ----------------------------------------------------------------------------------------------- pure parts


def test_a_change_inside_functions_names_them_and_one_outside_names_none():
    sources = {"pager/core.py": CORE}
    assert changed_functions(FIX, sources) == {("pager/core.py", "paginate")}
    assert changed_functions(SNEAKY, sources) == {("pager/core.py", "paginate"), ("pager/core.py", "label")}
    assert changed_functions(MODULE_LEVEL, sources) is None  # module-level code: any test may see it
    new_file = "diff --git a/pager/x.py b/pager/x.py\nnew file mode 100644\n--- /dev/null\n+++ b/pager/x.py\n@@ -0,0 +1 @@\n+X = 1\n"
    assert changed_functions(new_file, sources) is None
    assert changed_functions(FIX, {}) is None  # a file whose base text is unknown


def test_only_a_command_that_names_no_tests_of_its_own_is_narrowed():
    ids = ["tests/test_pager.py::test_first_page", "tests/test_x.py::test_p[a b]"]
    narrowed = targeted_command("python3 -m pytest -q -p no:cacheprovider", ids)
    assert narrowed == ("python3 -m pytest -q -p no:cacheprovider tests/test_pager.py::test_first_page "
                        "'tests/test_x.py::test_p[a b]'")
    assert targeted_command("pytest -q", ids[:1]) == "pytest -q tests/test_pager.py::test_first_page"
    assert targeted_command("pytest -q tests/unit", ids) is None  # the ids would add to its folder, not narrow it
    assert targeted_command("make test", ids) is None
    assert targeted_command("pytest -q", []) is None
    assert targeted_command("pytest -q", ["t.py::" + "x" * 200] * 1000) is None  # too long for one command


def test_the_estimate_keeps_the_base_results_of_the_tests_not_run():
    reach = SuiteReach(("a", "b", "c", "d"), frozenset({0, 3}), {("m.py", "f"): frozenset({0, 1})})
    assert reach.tests_for({("m.py", "f")}) == [0, 1] and reach.tests_for({("m.py", "g")}) == []
    fixed = estimate(reach, [0, 1], passed=2, run=2)
    assert fixed.counts == (3, 4) and not fixed.estimated_ok  # d failed at the base and was not run
    broken_import = estimate(reach, [0, 1], passed=0, run=1)  # one collection error stands for both
    assert broken_import.failed == 2


def test_a_timeout_follows_the_base_run_with_a_floor_and_a_ceiling():
    assert timeout_from_base(2.0, ratio=5, floor_s=5, ceiling_s=300) == 10.0
    assert timeout_from_base(0.4, ratio=5, floor_s=5, ceiling_s=300) == 5.0
    assert timeout_from_base(100.0, ratio=5, floor_s=5, ceiling_s=300) == 300.0
    assert timeout_from_base(None, ratio=5, floor_s=5, ceiling_s=300) == 300.0


def test_a_reach_from_the_state_is_read_as_data():
    assert SuiteReach.from_json(None) is None
    assert SuiteReach.from_json({"ids": "x", "functions": []}) is None
    reach = SuiteReach.from_json({"ids": ["a", "b"], "failed": [1, 7, "x"],
                                  "functions": [["m.py", "f", [0, 1, 9]], ["bad"], ["m.py", 3, [0]]]})
    assert reach is not None and reach.failed == frozenset({1}) and reach.functions == {("m.py", "f"): frozenset({0, 1})}


def test_the_plugin_records_which_tests_reach_each_function(tmp_path: Path):
    (tmp_path / "pager").mkdir()
    (tmp_path / "pager" / "__init__.py").write_text("")
    (tmp_path / "pager" / "core.py").write_text(CORE)
    for path, text in TESTS.items():
        (tmp_path / path).parent.mkdir(exist_ok=True)
        (tmp_path / path).write_text(text)
    done, out = run_with_spectrum_plugin(tmp_path)
    assert done.returncode == 1, done.stdout  # test_first_page fails: the bug
    spectrum = read_spectrum(out.read_text(), FunctionIndex({"pager/core.py": CORE, **TESTS}))
    assert spectrum is not None and len(spectrum.ids) == 7
    reach = SuiteReach.from_json(reach_summary(spectrum))
    assert reach is not None
    named = {f: sorted(reach.ids[i].split("::")[1] for i in t) for f, t in reach.functions.items()}
    assert named[("pager/core.py", "paginate")] == ["test_empty", "test_first_page"]
    assert named[("pager/core.py", "label")] == ["test_label"]  # not test_default_label: label ran at import
    assert [reach.ids[i] for i in reach.failed] == ["tests/test_pager.py::test_first_page"]


# ----------------------------------------------------------------------------------------------- in Docker


def _repo(root: Path) -> Path:
    (root / "pager").mkdir(parents=True)
    (root / "pager" / "__init__.py").write_text("")
    (root / "pager" / "core.py").write_text(CORE)
    for path, text in TESTS.items():
        (root / path).parent.mkdir(exist_ok=True)
        (root / path).write_text(text)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=root, check=True)
    return root


def _test_runs(events: EventLog, since: int) -> list[str]:
    return [e.data["command"] for e in events.events[since:] if e.kind == "sandbox.exec"
            and "agentflow_pytest.py" in e.data.get("command", "") and "agentflow_spectrum" not in e.data["command"]]


@pytest.mark.docker
async def test_in_a_real_sandbox_candidates_run_the_tests_reaching_their_change_and_finalists_the_suite(
        docker_image: str, tmp_path: Path):
    from agentflow.repair.config import load_repair_config
    from agentflow.sandbox import open_sandbox
    from agentflow.swe.workspace import repo_task

    task = repo_task(_repo(tmp_path / "repo"), "paginate(items, 1, 3) returns the second page: pages are 1-based")
    cfg = load_repair_config(["backend=docker", f"sandbox.image={docker_image}"])
    events = EventLog()
    async with open_sandbox("docker", cfg.sandbox, events=events) as sandbox:
        bench = Workbench(sandbox, task, cfg, "python3")
        await bench.setup()
        base = await bench.verify_base()
        assert base.passed is False and base.counts == (6, 7) and base.seconds
        _, summary = await bench.gather_evidence(task.problem_statement, await bench.python_sources(),
                                                 test_timeout_s=300)
        how = HowToVerify(base=base, reach=SuiteReach.from_json(summary["reach"]))
        assert how.reach is not None and len(how.reach.ids) == 7

        mark = len(events.events)
        fixed, _ = await bench.verify(FIX, how)
        runs = _test_runs(events, mark)
        assert fixed.targeted == 2 and fixed.passed is True and fixed.counts == (7, 7)
        assert len(runs) == 1 and "test_first_page" in runs[0] and "test_count" not in runs[0]

        mark = len(events.events)
        broken, _ = await bench.verify(BREAK_COUNT, how)  # a loser: stops at the tests reaching page_count
        # ... and the test that failed at the base, which page_count never reaches: it shows the bug
        assert "test_first_page" in _test_runs(events, mark)[0]
        assert broken.targeted == 4 and broken.passed is False and broken.counts == (5, 7)  # test_rest, and the bug

        mark = len(events.events)
        moved, _ = await bench.verify(MODULE_LEVEL, how)  # module level: the whole suite, once
        assert moved.targeted is None and moved.counts == (6, 7) and len(_test_runs(events, mark)) == 1

        hung, _ = await bench.verify(HANG, how)
        limit = bench.candidate_timeout(how)
        assert limit == max(cfg.tests.timeout_floor_s, cfg.tests.timeout_ratio * base.seconds) < cfg.tests.timeout_s
        assert hung.passed is False and hung.seconds is not None and limit <= hung.seconds < limit + 15

        sneaky, _ = await bench.verify(SNEAKY, how)
        assert sneaky.targeted == 3 and sneaky.passed is True  # the import-time constant is not among its tests

        # choosing: the sneaky patch leads the vote; the whole suite refutes it, the plain fix is confirmed
        attempts = [verified("t/c1", SNEAKY, sneaky, 1), verified("t/c2", SNEAKY, sneaky.model_copy(), 2),
                    verified("t/c3", FIX, fixed, 3)]
        mark = len(events.events)
        best, _ = await choose(attempts, ChooseSettings(vote=True), None, task.problem_statement, Budget(), events,
                               confirm=functools.partial(bench.verify_whole, how=how), instance_id="t")
        assert best is not None and best.candidate_id == "t/c3"
        confirms = [e.data for e in events.events[mark:] if e.kind == "repair.confirm"]
        assert [(c["candidate_id"], c["held"]) for c in confirms] == [("t/c1", False), ("t/c3", True)]
        assert best.verification.targeted is None and best.verification.counts == (7, 7)
        # both samples of the refuted patch share its whole-suite result (c2 was not confirmed on its own), on
        # copies: the candidates given (the state's) stay as they were verified
        assert len(_test_runs(events, mark)) == 2  # one whole-suite run per finalist, none for the others
        assert [a.verified.passed for a in attempts] == [True, True, True]

        mark = len(events.events)
        final, _ = await bench.verify(FIX, how, final=True)  # the report reuses the finalist's whole run
        assert final.passed is True and _test_runs(events, mark) == []

