"""Pre-flight: a user's repository as found (flat or src layout, `pytest` as the test command) is verified by
tests that run; tests that cannot run stop the repair before the first model call. Real Docker sandbox,
scripted (replayed) model answers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agentflow.cli.main import run

from .conftest import read_jsonl, scripted_cassette

pytestmark = pytest.mark.docker

ISSUE = "paginate(items, 1, 3) returns the second page instead of the first: page numbers are 1-based"
FIX = ("pager/core.py\n<<<<<<< SEARCH\n    start = page * per_page\n=======\n    start = (page - 1) * per_page\n"
       ">>>>>>> REPLACE\nEND_EDITS")
PAGER = '''def paginate(items, page, per_page):
    """Items of page `page` (1-based), `per_page` a page."""
    start = page * per_page
    return items[start:start + per_page]
'''
TESTS = '''from pager import paginate


def test_first_page():
    assert paginate(list(range(10)), 1, 3) == [0, 1, 2]


def test_empty():
    assert paginate([], 1, 3) == []
'''


MISSING_DEP = "import nowhere_to_be_found\n"
"""A line importing a module that exists nowhere (a dependency the sandbox lacks)."""


def make_repo(root: Path, *, src: bool = False, extra_test: str | None = None, core: str = PAGER,
              modules: dict[str, str] | None = None) -> Path:
    """A newcomer's repository: package `pager` (at the root, or under src/; more of its `modules` by file
    name), tests importing it, no pytest configuration, an off-by-one; committed with git."""
    pkg = root / ("src/pager" if src else "pager")
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pager.core import paginate\n\n__all__ = ['paginate']\n")
    (pkg / "core.py").write_text(core)
    for name, text in (modules or {}).items():
        (pkg / name).write_text(text)
    (root / "tests").mkdir()
    (root / "tests" / "test_pager.py").write_text(TESTS)
    if extra_test is not None:
        (root / "tests" / "test_extra.py").write_text(extra_test)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=root, check=True)
    return root


def repair(out: Path, image: str, repo: Path, cassette: Path, *args: str) -> int:
    return run(["repair", str(repo), "--issue", ISSUE, "--model", f"replay:{cassette}", "--sandbox", "docker",
                "-c", f"sandbox.image={image}", "-c", "edit.format=search_replace", "-c", "search.concurrency=1",
                "-c", "rank=false", "-o", str(out), *args])


def model_calls(out: Path) -> int:
    return sum(1 for e in read_jsonl(out / "events.jsonl") if e.get("kind") == "model.call")


def test_flat_layout_with_the_pytest_script_is_verified_and_resolved(docker_image: str, tmp_path: Path, capsys):
    """The newcomer's case: `pytest -q` (the console script) on a flat package; the one-line fix passes."""
    repo = make_repo(tmp_path / "pager-repo")
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 8)
    out = tmp_path / "run"
    assert repair(out, docker_image, repo, cassette, "--test-cmd", "pytest -q", "--strategy", "best_of_n",
                  "-n", "4", "--json") == 0
    shown = json.loads(capsys.readouterr().out)
    assert "start = (page - 1) * per_page" in shown["model_patch"]
    assert shown["verification"] == {**shown["verification"], "kind": "test_cmd", "exit_code": 0, "passed": True}
    assert shown["report"]["resolved"] is True
    # the candidates were tested in the search's branches, each on its own view of the workbench: their runs
    # count in the task's test time all the same
    assert shown["test_seconds"] >= shown["longest_test_wait_s"] > 0
    pre = shown["preflight"]  # the outcome says what the pre-flight found: the bug's failing test, the other passing
    assert pre["cause"] is None and pre["counts"] == {"failed": 1, "passed": 1}
    assert any("repository root" in f for f in pre["fixed"])
    events = [e for e in read_jsonl(out / "events.jsonl") if e.get("kind") == "repair.preflight"]
    assert len(events) == 1 and events[0]["data"]["exit_code"] == 1


def test_tests_failing_at_the_base_make_the_default_repair_search_a_tree(docker_image: str, tmp_path: Path, capsys):
    """No --strategy: the pre-flight's failing test switches the workflow's one chain of attempts to MCTS
    (`strategy_when_tests_fail`), said in a decision line; the fix passes and stops the search."""
    repo = make_repo(tmp_path / "pager-repo")
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 8)
    out = tmp_path / "run"
    assert repair(out, docker_image, repo, cassette, "--test-cmd", "pytest -q", "-c", "mutants=false", "--json") == 0
    captured = capsys.readouterr()
    shown = json.loads(captured.out)
    assert shown["report"]["resolved"] is True and shown["verification"]["passed"] is True
    events = read_jsonl(out / "events.jsonl")
    switched = [e["data"] for e in events if e.get("kind") == "repair.search"]
    assert [(d["search"], d["expected_calls"]["search"]) for d in switched] == [("mcts, n=12", 12)]
    assert "decision: search mcts, n=12, because the tests fail at the base commit" in captured.err
    assert model_calls(out) == 1  # the first expansion passes the tests: the tree stops there


def test_tests_that_cannot_be_collected_stop_before_the_first_model_call(docker_image: str, tmp_path: Path, capsys):
    """The package imports a module that exists nowhere (its own dependency, missing): exit 2, one line naming
    the cause and the fix, no model call."""
    repo = make_repo(tmp_path / "broken", core=MISSING_DEP + PAGER)
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 8)
    out = tmp_path / "run"
    assert repair(out, docker_image, repo, cassette, "--test-cmd", "pytest -q") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "cannot run at the base commit" in err and "No module named 'nowhere_to_be_found'" in err
    assert "tests/test_pager.py" in err and "requirements" in err
    assert model_calls(out) == 0
    assert not (out / "instances" / "broken" / "outcome.json").exists()  # a --resume after the fix runs it


def test_check_only_runs_the_preflight(docker_image: str, tmp_path: Path, capsys):
    repo = make_repo(tmp_path / "pager-repo")
    assert run(["repair", str(repo), "--check", "--test-cmd", "python -m pytest -q", "--sandbox", "docker",
                "-c", f"sandbox.image={docker_image}", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["exit_code"] == 1 and found["counts"] == {"failed": 1, "passed": 1}
    assert any("`python` runs python3" in f for f in found["fixed"])  # the image has only python3


def test_check_names_a_bad_node_setting_before_any_sandbox(tmp_path: Path, capsys):
    """`--check` validates what the run would: a node setting no value of which is allowed is a usage error
    (exit 2, one line naming the setting and the allowed values), before a sandbox is opened."""
    repo = make_repo(tmp_path / "pager-repo")
    assert run(["repair", str(repo), "--check", "--sandbox", "docker", "-c", "sandbox.image=no-such-image:0",
                "-c", "noop_escalation=[format,sideways]"]) == 2
    err = capsys.readouterr().err
    assert "settings.noop_escalation.1: Input should be 'format', 'failure', 'suspect' or 'infill'" in err
    assert "Traceback" not in err and "no-such-image" not in err


def test_src_layout_suite_runs_in_blind_verification(docker_image: str, tmp_path: Path, capsys):
    """No --test-cmd: blind verification's `python3 -m pytest` imports a src-layout package."""
    repo = make_repo(tmp_path / "srcpager", src=True)
    fix = FIX.replace("pager/core.py", "src/pager/core.py")
    cassette = scripted_cassette(tmp_path / "fix.json", [fix] * 8)
    out = tmp_path / "run"
    assert repair(out, docker_image, repo, cassette, "--json") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["preflight"]["counts"] == {"failed": 1, "passed": 1}
    assert any("src/" in f for f in shown["preflight"]["fixed"])
    assert shown["verification"]["kind"] == "test_cmd" and shown["verification"]["passed"] is True


def test_in_a_batch_tests_that_cannot_run_are_that_tasks_env_error_and_the_others_go_on(
        docker_image: str, tmp_path: Path):
    """One repository's tests cannot be collected: that task is reported with the pre-flight's cause (no model
    call for it), the other task of the batch is repaired, and the exit code is the batch's."""
    good = make_repo(tmp_path / "good")
    broken = make_repo(tmp_path / "broken", core=MISSING_DEP + PAGER)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"instance_id": name, "repo": name, "base_commit": "HEAD",
                                         "problem_statement": ISSUE, "test_cmd": "pytest -q",
                                         "FAIL_TO_PASS": [], "PASS_TO_PASS": []}) + "\n"
                             for name in ("broken", "good")))
    del good, broken
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 8)
    out = tmp_path / "run"
    assert run(["bench", str(tasks), "--model", f"replay:{cassette}", "--sandbox", "docker",
                "-c", f"sandbox.image={docker_image}", "-c", "edit.format=search_replace", "-c", "search.concurrency=1",
                "-c", "rank=false", "-c", "tests.feedback=repo", "-c", "mutants=false", "--workers", "1", "-o", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["instances"]["broken"]["status"] == "env_error"
    outcome = json.loads((out / "instances" / "broken" / "outcome.json").read_text())
    assert outcome["error"].startswith("pre-flight: the test command cannot run at the base commit")
    assert "nowhere_to_be_found" in outcome["error"]
    assert report["resolved_ids"] == ["good"]
    calls = [e for e in read_jsonl(out / "events.jsonl") if e.get("kind") == "model.call"]
    assert calls and all(e.get("instance_id", e.get("node_id", "")).startswith("good") for e in calls), calls[:2]


OPTIONAL_IMPORTS = {
    "the test file": ({}, MISSING_DEP),
    "a submodule of the package": ({"diagram.py": MISSING_DEP}, "import pager.diagram\n"),
}
"""Who imports the module the sandbox lacks: (the package's extra modules, the extra test file's imports)."""


@pytest.mark.parametrize("importer", OPTIONAL_IMPORTS)
def test_a_test_file_needing_a_missing_optional_module_is_left_out_and_the_rest_repairs(
        docker_image: str, tmp_path: Path, capsys, importer: str):
    """#52.4: one test file needs a module the sandbox lacks, imported by the file itself or by a submodule of
    the package it imports (an optional extra, as a plotting or diagram module's); the rest of the suite runs
    without that file, so the pre-flight leaves it out (said in its line, with the reason) rather than refuse
    the task, and every later run leaves it out too: the fix's verification passes (the file, collected, would
    fail every run)."""
    modules, imports = OPTIONAL_IMPORTS[importer]
    repo = make_repo(tmp_path / "pager-repo", modules=modules, extra_test=imports + "\n\ndef test_x():\n    pass\n")
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 8)
    out = tmp_path / "run"
    assert repair(out, docker_image, repo, cassette, "--test-cmd", "pytest -q", "--strategy", "best_of_n",
                  "-n", "2", "--json") == 0
    captured = capsys.readouterr()
    shown = json.loads(captured.out)
    pre = shown["preflight"]
    assert pre["cause"] is None and pre["counts"] == {"failed": 1, "passed": 1}
    assert pre["left_out"] == {"tests/test_extra.py": "ModuleNotFoundError: No module named 'nowhere_to_be_found'"}
    assert "left out (an optional module the sandbox lacks): tests/test_extra.py" in captured.err
    assert shown["verification"]["passed"] is True and shown["report"]["resolved"] is True


BOOM = 'PAGE_BASE = int("1st")\n\n\n' + PAGER.replace("start = page * per_page", "start = (page - 1) * per_page")
BOOM_FIX = ('pager/core.py\n<<<<<<< SEARCH\nPAGE_BASE = int("1st")\n=======\nPAGE_BASE = 1\n'
            ">>>>>>> REPLACE\nEND_EDITS")


def test_the_package_raising_on_import_is_the_failing_behaviour_not_a_setup_failure(
        docker_image: str, tmp_path: Path, capsys):
    """#53.6: importing the package under repair raises (the issue's bug); the pre-flight says so and the repair
    goes on, the collection error being the tests' failure at the base commit; the fix passes."""
    repo = make_repo(tmp_path / "pager-repo", core=BOOM)
    cassette = scripted_cassette(tmp_path / "fix.json", [BOOM_FIX] * 8)
    out = tmp_path / "run"
    assert run(["repair", str(repo), "--issue", "import pager fails: ValueError: invalid literal for int()",
                "--model", f"replay:{cassette}", "--sandbox", "docker", "-c", f"sandbox.image={docker_image}",
                "-c", "edit.format=search_replace", "-c", "search.concurrency=1", "-c", "rank=false", "-o", str(out),
                "--test-cmd", "pytest -q", "--strategy", "best_of_n", "-n", "2", "--json"]) == 0
    captured = capsys.readouterr()
    shown = json.loads(captured.out)
    pre = shown["preflight"]
    assert pre["cause"] is None and pre["exit_code"] == 2
    assert pre["own_errors"] == {"tests/test_pager.py": "ValueError: invalid literal for int() with base 10: '1st'"}
    assert "the repository's own code raises while the tests are collected" in captured.err
    assert shown["verification"]["passed"] is True and shown["report"]["resolved"] is True
