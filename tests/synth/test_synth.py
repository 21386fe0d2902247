"""`agentflow tasks synth` end to end in the Docker sandbox: valid tasks, gold resolves them, same seed same bytes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentflow.swe.evaluate import EvalConfig, evaluate_predictions
from agentflow.swe.tasks import load_predictions, load_tasks
from agentflow.synth.build import SynthConfig, synthesize

from .fixture import write_repo, write_uncaught_repo

SETTINGS = {"seed": 7, "limit": 3, "max_candidates": 8, "max_failing": 5}


def _config(image: str, **extra: object) -> SynthConfig:
    return SynthConfig.model_validate({**SETTINGS, "backend": "docker", "sandbox": {"image": image}, **extra})


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def made(docker_image: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    root = tmp_path_factory.mktemp("synth")
    repo = write_repo(root / "minipkg", src_layout=True)
    import asyncio

    report = asyncio.run(synthesize(repo, root / "out", _config(docker_image)))
    return root, report


@pytest.mark.docker
def test_synth_makes_valid_tasks_the_gold_resolves(made: tuple[Path, object], docker_image: str, tmp_path: Path) -> None:
    import asyncio

    root, report = made
    out = root / "out"
    tasks = load_tasks(out / "tasks.jsonl")
    assert len(tasks) == SETTINGS["limit"], report
    for task in tasks:
        assert 1 <= len(task.FAIL_TO_PASS) <= SETTINGS["max_failing"]
        assert task.PASS_TO_PASS and not set(task.FAIL_TO_PASS) & set(task.PASS_TO_PASS)
        assert (out / task.repo).is_dir() and "src/minipkg/core.py" in task.patch
    cfg = EvalConfig.model_validate({"backend": "docker", "workers": 2, "sandbox": {"image": docker_image}})
    full = asyncio.run(evaluate_predictions(tasks, load_predictions(out / "gold.jsonl"), cfg, out_dir=tmp_path))
    assert full["resolved_instances"] == len(tasks) and full["error_instances"] == 0


@pytest.mark.docker
def test_same_seed_gives_the_same_bytes(made: tuple[Path, object], docker_image: str) -> None:
    import asyncio

    root, _ = made
    asyncio.run(synthesize(root / "minipkg", root / "again", _config(docker_image)))
    first, second = _files(root / "out"), _files(root / "again")
    assert first == second and "tasks.jsonl" in first


@pytest.mark.docker
def test_statements_never_name_the_changed_file_or_line(made: tuple[Path, object]) -> None:
    root, _ = made
    for line in (root / "out" / "tasks.jsonl").read_text().splitlines():
        task = json.loads(line)
        path = task["patch"].split("\n", 1)[0].split(" b/", 1)[1]
        changed = [x[1:].strip() for x in task["patch"].splitlines()
                   if x[:1] in "+-" and not x.startswith(("+++", "---")) and x[1:].strip()]
        statement = task["problem_statement"]
        assert changed and path not in statement and path.removeprefix("src/") not in statement
        assert not [c for c in changed if c in statement], (task["instance_id"], changed)
        assert "`" in statement and "tests/test_core.py::" in statement


@pytest.mark.docker
def test_a_bug_no_test_catches_is_dropped(docker_image: str, tmp_path: Path) -> None:
    import asyncio

    repo = write_uncaught_repo(tmp_path / "lonely")
    report = asyncio.run(synthesize(repo, tmp_path / "out", _config(docker_image)))
    assert report.tasks == [] and report.tried >= 1
    assert report.dropped == {"no test fails": report.tried}
    assert (tmp_path / "out" / "tasks.jsonl").read_text() == ""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentflow.cli.main", "tasks", "synth", *args],
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        ("missing-repo", "is not a folder"),
        ("output-not-empty", "is not empty"),
        ("output-inside-repo", "inside the repository"),
        ("bad-statement", "--statement"),
        ("bad-operator", "unknown operator"),
        ("zero-limit", "--limit"),
        ("no-tests", "no test files"),
        ("no-source", "no package source"),
        ("bad-sandbox", "--sandbox"),
        ("symlink-out", "outside the repository"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, case: str, needle: str) -> None:
    repo = write_repo(tmp_path / "repo")
    out = tmp_path / "out"
    args = {
        "missing-repo": [str(tmp_path / "nope"), "-o", str(out)],
        "output-not-empty": [str(repo), "-o", str(repo / "tests")],
        "output-inside-repo": [str(repo), "-o", str(repo / "new")],
        "bad-statement": [str(repo), "-o", str(out), "--statement", "poem"],
        "bad-operator": [str(repo), "-o", str(out), "--operator", "delete-everything"],
        "zero-limit": [str(repo), "-o", str(out), "--limit", "0"],
        "no-tests": [str(write_repo(tmp_path / "notests")), "-o", str(out)],
        "no-source": [str(tmp_path / "nosource"), "-o", str(out)],
        "bad-sandbox": [str(repo), "-o", str(out), "--sandbox", "vm"],
        "symlink-out": [str(repo), "-o", str(out)],
    }[case]
    if case == "symlink-out":
        (tmp_path / "secret.txt").write_text("host file")
        (repo / "minipkg" / "data.txt").symlink_to(tmp_path / "secret.txt")
    if case == "no-tests":
        for f in (tmp_path / "notests" / "tests").iterdir():
            f.unlink()
    if case == "no-source":
        (tmp_path / "nosource").mkdir()
        (tmp_path / "nosource" / "test_x.py").write_text("def test_x():\n    pass\n")
    proc = _cli(*args, "--sandbox", "local") if case not in ("bad-sandbox",) else _cli(*args)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and needle in lines[0], lines
    assert not out.exists() or case == "output-not-empty"
