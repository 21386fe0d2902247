"""Item 2: a model-made patch reaches the user's tree only through host-side checks (`repair --apply`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agentflow.cli.main import run
from agentflow.errors import UserError
from agentflow.swe.tree import apply_to_tree


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
