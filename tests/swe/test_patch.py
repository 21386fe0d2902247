from __future__ import annotations

import pytest

from agentflow.sandbox import open_sandbox
from agentflow.swe.patch import (
    apply_patch,
    clean_patch,
    is_empty_patch,
    is_test_path,
    parse_patch,
    strip_test_files,
    workspace_diff,
)

SRC_DIFF = """diff --git a/pkg/mod.py b/pkg/mod.py
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -1,3 +1,3 @@
 def f():
-    return 1
+    return 2
 
"""
TEST_DIFF = """diff --git a/tests/test_mod.py b/tests/test_mod.py
--- a/tests/test_mod.py
+++ b/tests/test_mod.py
@@ -1,2 +1,2 @@
 def test_f():
-    assert True
+    assert False
"""


@pytest.mark.parametrize(
    "path, expected",
    [
        ("tests/test_x.py", True),
        ("pkg/tests/helpers.py", True),
        ("test/data.json", True),
        ("test_thing.py", True),
        ("pkg/thing_test.py", True),
        ("conftest.py", True),
        ("pkg/sub/conftest.py", True),
        ("pkg/testing_utils.py", False),
        ("pkg/contest.py", False),
        ("src/latest.py", False),
        ("pkg/mod.py", False),
    ],
)
def test_is_test_path(path: str, expected: bool):
    assert is_test_path(path) is expected


def test_strip_test_files_keeps_source_edits():
    kept, dropped = strip_test_files(SRC_DIFF + TEST_DIFF)
    assert dropped == ["tests/test_mod.py"]
    assert kept == SRC_DIFF
    assert parse_patch(kept).problem is None


def test_empty_and_unparsable_patches():
    assert is_empty_patch(None) and is_empty_patch("  \n") and not is_empty_patch(SRC_DIFF)
    assert parse_patch("").problem == "empty patch"
    assert "no file headers" in (parse_patch("I fixed it, trust me.").problem or "")
    assert "no hunks" in (parse_patch("--- a/x.py\n+++ b/x.py\n").problem or "")


def test_clean_patch_takes_the_fenced_diff():
    answer = "Here is the fix:\n```diff\n" + SRC_DIFF.replace("\n", "\r\n") + "```\nHope it helps."
    assert clean_patch(answer) == SRC_DIFF
    assert clean_patch("Some words\n" + SRC_DIFF) == SRC_DIFF
    assert clean_patch("no diff here") == ""


async def _workspace(sb) -> None:
    await sb.write_file("pkg/mod.py", "def f():\n    return 1\n\n")
    await sb.write_file("tests/test_mod.py", "def test_f():\n    assert True\n")
    r = await sb.exec("git init -q . && git add -A && git -c user.name=t -c user.email=t@t commit -qm base")
    assert r.ok, r.output


async def test_apply_with_git_then_diff_without_tests():
    async with open_sandbox("local") as sb:
        await _workspace(sb)
        result = await apply_patch(sb, SRC_DIFF + TEST_DIFF)
        assert result.applied and result.command == "git apply --verbose"
        assert "return 2" in await sb.read_file("pkg/mod.py")
        diff = await workspace_diff(sb, "HEAD")
        assert "pkg/mod.py" in diff and "tests/test_mod.py" not in diff
        assert "tests/test_mod.py" in await workspace_diff(sb, "HEAD", exclude_tests=False)


async def test_fuzzy_patch_falls_back_to_patch():
    # context lines differ slightly from the file: git apply refuses, patch --fuzz accepts
    fuzzy = SRC_DIFF.replace(" def f():\n", " def f():  # old comment\n")
    async with open_sandbox("local") as sb:
        await _workspace(sb)
        result = await apply_patch(sb, fuzzy)
        assert result.applied and result.command.startswith("patch --batch --fuzz=5")
        assert "return 2" in await sb.read_file("pkg/mod.py")


async def test_patch_that_does_not_fit_is_not_applied():
    wrong = SRC_DIFF.replace("-    return 1", "-    return 42")
    async with open_sandbox("local") as sb:
        await _workspace(sb)
        result = await apply_patch(sb, wrong)
        assert not result.applied and result.command is None
        assert "return 1" in await sb.read_file("pkg/mod.py")
