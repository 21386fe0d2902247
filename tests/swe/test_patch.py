from __future__ import annotations

import pytest

from agentflow.sandbox import open_sandbox
from agentflow.swe.patch import (
    NOOP_PARSE_LIMIT,
    apply_patch,
    changes_nothing,
    clean_patch,
    is_empty_patch,
    is_test_path,
    parse_patch,
    strip_test_files,
    touched_in_place,
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


async def test_a_patch_only_a_lenient_tool_would_apply_is_refused():
    """No `patch --fuzz` fallback: what grading restores is git's reading of the patch, so only git applies it."""
    # context lines differ slightly from the file: git apply refuses (patch --fuzz=5 would accept)
    fuzzy = SRC_DIFF.replace(" def f():\n", " def f():  # old comment\n")
    async with open_sandbox("local") as sb:
        await _workspace(sb)
        result = await apply_patch(sb, fuzzy)
        assert not result.applied and result.command is None and result.files == []
        assert "return 1" in await sb.read_file("pkg/mod.py")


async def test_applying_says_which_files_git_touched():
    renamed = "diff --git a/pkg/mod.py b/pkg/other.py\nsimilarity index 100%\nrename from pkg/mod.py\nrename to pkg/other.py\n"
    async with open_sandbox("local") as sb:
        await _workspace(sb)
        result = await apply_patch(sb, renamed + TEST_DIFF)
        assert result.applied
        assert [(f.old_path, f.new_path) for f in result.files] == [
            ("pkg/mod.py", "pkg/other.py"), ("tests/test_mod.py", "tests/test_mod.py")]


async def test_patch_that_does_not_fit_is_not_applied():
    wrong = SRC_DIFF.replace("-    return 1", "-    return 42")
    async with open_sandbox("local") as sb:
        await _workspace(sb)
        result = await apply_patch(sb, wrong)
        assert not result.applied and result.command is None
        assert "return 1" in await sb.read_file("pkg/mod.py")


BASE_SOURCE = '''"""Least-recently-used cache."""

from collections import OrderedDict


class LRUCache:
    """Keeps at most `maxsize` entries."""

    def get(self, key, default=None):
        """The value of `key`, or `default`."""
        value = self._data.get(key, default)  # no move_to_end yet
        return value
'''


@pytest.mark.parametrize("after, noop", [
    # the docstrings of the module, the class and the method reworded (and one dropped)
    (BASE_SOURCE.replace("Least-recently-used cache.", "An LRU cache.")
     .replace('"""Keeps at most `maxsize` entries."""', '"""Keeps at most `maxsize` entries,\n    evicting the oldest."""')
     .replace('        """The value of `key`, or `default`."""\n', ""), True),
    (BASE_SOURCE.replace("# no move_to_end yet", "# TODO: mark the entry used"), True),  # a comment
    (BASE_SOURCE.replace("        value = self._data.get(key, default)", "        value = self._data.get(\n            key,  default)")
     + "\n\n", True),  # layout
    (BASE_SOURCE.replace("get(key, default)", "get(key, None)"), False),  # one token of code
    (BASE_SOURCE.replace("        return value", "        \"value\"\n        return value"), False),  # a string statement, no docstring
    (BASE_SOURCE.replace("    def get", "    def get(self\n    def get"), False),  # does not parse
])
def test_a_patch_that_changes_only_docstrings_comments_or_layout_changes_nothing(after: str, noop: bool):
    assert changes_nothing({"cachette/lru.py": BASE_SOURCE}, {"cachette/lru.py": after}) is noop


def test_other_files_compare_but_for_whitespace_and_anything_unreadable_is_a_change():
    readme = "Usage:\n\n    cache.get(key)\n"
    assert changes_nothing({"README.md": readme}, {"README.md": readme.replace("\n\n", "\n \n\n")})
    assert not changes_nothing({"README.md": readme}, {"README.md": readme.replace("get", "set")})
    assert not changes_nothing({"a.py": "x = 1\n"}, {"a.py": "x = 1\n", "b.py": "\n"})  # a new file
    assert not changes_nothing({"a.py": "x = 1\n"}, {"a.py": None})  # could not be read
    assert not changes_nothing({"a.cfg": None}, {"a.cfg": None})
    long = "x = 1\n" * (NOOP_PARSE_LIMIT // 6 + 1)  # past the parse limit: not read as code
    assert not changes_nothing({"a.py": long}, {"a.py": long + "# a comment\n"})
    assert changes_nothing({"a.py": long}, {"a.py": long})  # the same text is the same, whatever its length
    deep = "x = " + "(" * 200_000 + ")" * 200_000 + "\n"  # nesting the parser refuses
    assert not changes_nothing({"a.py": deep}, {"a.py": deep + "# a comment\n"})


NEW_FILE = """diff --git a/pkg/new.py b/pkg/new.py
new file mode 100644
--- /dev/null
+++ b/pkg/new.py
@@ -0,0 +1 @@
+x = 1
"""
DELETED = """diff --git a/pkg/mod.py b/pkg/mod.py
deleted file mode 100644
--- a/pkg/mod.py
+++ /dev/null
@@ -1 +0,0 @@
-x = 1
"""


def test_a_new_deleted_or_renamed_file_is_a_change_without_reading_anything():
    assert touched_in_place(SRC_DIFF + TEST_DIFF) == ["pkg/mod.py", "tests/test_mod.py"]
    assert touched_in_place(NEW_FILE) is None
    assert touched_in_place(DELETED) is None
    assert touched_in_place(SRC_DIFF.replace("b/pkg/mod.py", "b/pkg/other.py")) is None  # renamed and changed
    assert touched_in_place(SRC_DIFF + NEW_FILE) is None
    assert touched_in_place("not a diff\n") is None
