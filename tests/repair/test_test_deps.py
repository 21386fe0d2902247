"""A repository's test-only dependencies, from a wheelhouse, are there for the repair's own test runs as for
grading (one environment): a src-layout package whose tests import a test-only helper and whose pytest
configuration turns on that helper's plugin, verified blind (`python3 -m pytest`, no --test-cmd). Real Docker
sandbox (and the local backend, which keeps the host's pytest plugins out but loads the task's), replayed model
answers, a wheel built here."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from agentflow.cli.main import run

from .conftest import read_jsonl, scripted_cassette

ISSUE = "paginate(items, 1, 3) returns the second page instead of the first: page numbers are 1-based"
FIX = ("src/pager/core.py\n<<<<<<< SEARCH\n    start = page * per_page\n=======\n    start = (page - 1) * per_page\n"
       ">>>>>>> REPLACE\nEND_EDITS")
PAGER = '''def paginate(items, page, per_page):
    """Items of page `page` (1-based), `per_page` a page."""
    start = page * per_page
    return items[start:start + per_page]
'''
TESTS = '''from pager import paginate
from pagerkit import pages


def test_first_page(page_size):
    assert paginate(pages(10), 1, page_size) == [0, 1, 2]


def test_empty(page_size):
    assert paginate([], 1, page_size) == []
'''
# the test-only dependency: a helper module and a pytest plugin (its fixture and its command-line option, which
# the repository's own pytest configuration passes: without the plugin pytest stops with a usage error)
KIT = {
    "pagerkit/__init__.py": "def pages(n):\n    return list(range(n))\n",
    "pagerkit/plugin.py": (
        "import pytest\n\n\ndef pytest_addoption(parser):\n"
        "    parser.addoption('--page-size', type=int, default=10)\n\n\n"
        "@pytest.fixture\ndef page_size(request):\n    return request.config.getoption('--page-size')\n"
    ),
}


def make_wheel(folder: Path, name: str, version: str, files: dict[str, str], *, requires: list[str] = (),
               entry_points: str = "") -> Path:
    """A pure-Python wheel of `files` (its metadata may name dependencies: a wheelhouse installs it as it is)."""
    info = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {**files, f"{info}/METADATA": meta,
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    if entry_points:
        files[f"{info}/entry_points.txt"] = entry_points
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return wheel


def make_wheelhouse(folder: Path) -> Path:
    # declares pytest, which the wheelhouse does not hold: the sandbox's own pytest must do
    make_wheel(folder, "pagerkit", "1.0", KIT, requires=["pytest>=7"],
               entry_points="[pytest11]\npagerkit = pagerkit.plugin\n")
    return folder


def make_src_repo(root: Path) -> Path:
    """Package `pager` under src/ as published (no pythonpath anywhere), tests needing `pagerkit`, and a
    pyproject whose pytest options need pagerkit's plugin; committed with git."""
    (root / "src" / "pager").mkdir(parents=True)
    (root / "src" / "pager" / "__init__.py").write_text("from pager.core import paginate\n\n__all__ = ['paginate']\n")
    (root / "src" / "pager" / "core.py").write_text(PAGER)
    (root / "tests").mkdir()
    (root / "tests" / "test_pager.py").write_text(TESTS)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "pager"\nversion = "1.0"\n\n[tool.setuptools.packages.find]\nwhere = ["src"]\n\n'
        '[tool.pytest.ini_options]\naddopts = "--page-size=3"\ntestpaths = ["tests"]\n'
    )
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=root, check=True)
    return root


def repair(out: Path, image: str, *args: str) -> int:
    return run(["repair", *args, "--sandbox", "docker", "-c", f"sandbox.image={image}",
                "-c", "edit.format=search_replace", "-c", "search.concurrency=1", "-c", "rank=false", "-o", str(out)])


@pytest.mark.docker
def test_repair_repo_with_a_wheelhouse_verifies_blind_with_the_tests_own_dependencies(
        docker_image: str, tmp_path: Path, capsys):
    """`agentflow repair REPO --wheelhouse DIR`, no --test-cmd: the pre-flight sees the bug's failing test (not an
    import or usage error), blind verification passes the fix, and it is reported resolved."""
    repo = make_src_repo(tmp_path / "srcpager")
    wheels = make_wheelhouse(tmp_path / "wheels")
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 8)
    out = tmp_path / "run"
    assert repair(out, docker_image, str(repo), "--issue", ISSUE, "--model", f"replay:{cassette}",
                  "--wheelhouse", str(wheels), "-c", "mutants=false", "--json") == 0
    shown = json.loads(capsys.readouterr().out)
    pre = shown["preflight"]
    assert pre["cause"] is None and pre["counts"] == {"failed": 1, "passed": 1}, pre
    assert any("src/" in f for f in pre["fixed"])
    assert "start = (page - 1) * per_page" in shown["model_patch"]
    assert shown["verification"]["kind"] == "test_cmd" and shown["verification"]["passed"] is True
    assert shown["report"]["resolved"] is True
    model_calls = [e for e in read_jsonl(out / "events.jsonl") if e.get("kind") == "model.call"]
    assert model_calls  # the repair ran (the pre-flight did not stop it)


@pytest.mark.docker
def test_without_the_wheelhouse_the_missing_test_dependency_stops_it_before_any_model_call(
        docker_image: str, tmp_path: Path, capsys):
    """The same repository without its wheelhouse: exit 2, one line that names the unknown option of the missing
    plugin and says to give it with --wheelhouse."""
    repo = make_src_repo(tmp_path / "srcpager")
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 8)
    out = tmp_path / "run"
    assert repair(out, docker_image, str(repo), "--issue", ISSUE, "--model", f"replay:{cassette}") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "unrecognized arguments: --page-size=3" in err and "--wheelhouse" in err
    assert not any(e.get("kind") == "model.call" for e in read_jsonl(out / "events.jsonl"))


@pytest.mark.docker
def test_a_tasks_file_wheelhouse_serves_the_repairs_own_test_runs(docker_image: str, tmp_path: Path, capsys):
    """The same repository as a task whose `wheelhouse` holds the dependency (no `requirements`: every wheel in
    it is installed): blind verification runs the suite with it, and grading with the task's tests agrees."""
    make_src_repo(tmp_path / "srcpager")
    make_wheelhouse(tmp_path / "wheels")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({
        "instance_id": "srcpager-1", "repo": "srcpager", "base_commit": "HEAD", "problem_statement": ISSUE,
        "FAIL_TO_PASS": ["tests/test_pager.py::test_first_page"], "PASS_TO_PASS": ["tests/test_pager.py::test_empty"],
        "wheelhouse": "wheels",
    }) + "\n")
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 8)
    out = tmp_path / "run"
    assert repair(out, docker_image, "--tasks", str(tasks), "--model", f"replay:{cassette}", "-c", "tests.feedback=repo",
                  "--json") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["preflight"]["counts"] == {"failed": 1, "passed": 1}
    assert shown["report"]["resolved"] is True


async def test_the_local_backend_loads_the_plugins_of_the_tasks_requirements(tmp_path: Path):
    """The local backend turns pytest's plugin autoload off (the host's plugins are no part of the task); the
    plugin of a wheel the task installs still loads, so grading sees the tests run: the fix resolves, the base
    does not."""
    from agentflow.sandbox import open_sandbox
    from agentflow.swe.evaluate import run_prediction
    from agentflow.swe.tasks import load_tasks

    make_src_repo(tmp_path / "srcpager")
    make_wheelhouse(tmp_path / "wheels")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({
        "instance_id": "srcpager-1", "repo": "srcpager", "base_commit": "HEAD", "problem_statement": ISSUE,
        "FAIL_TO_PASS": ["tests/test_pager.py::test_first_page"], "PASS_TO_PASS": ["tests/test_pager.py::test_empty"],
        "requirements": ["pagerkit==1.0"], "wheelhouse": "wheels",
    }) + "\n")
    (task,) = load_tasks(tasks)
    fix = ("--- a/src/pager/core.py\n+++ b/src/pager/core.py\n@@ -2,3 +2,3 @@\n"
           '     """Items of page `page` (1-based), `per_page` a page."""\n'
           "-    start = page * per_page\n+    start = (page - 1) * per_page\n"
           "     return items[start:start + per_page]\n")
    async with open_sandbox("local") as sb:
        base = await run_prediction(sb, task, "", run_empty=True, rerun_failed=False)
    async with open_sandbox("local") as sb:
        fixed = await run_prediction(sb, task, fix, rerun_failed=False)
    assert base.tests_status["PASS_TO_PASS"]["success"] == ["tests/test_pager.py::test_empty"], base
    assert not base.resolved and fixed.resolved, fixed
