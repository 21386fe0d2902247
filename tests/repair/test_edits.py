"""SEARCH/REPLACE blocks: reading what small models write, applying it exactly or tolerantly."""

from __future__ import annotations

import pytest

from agentflow.repair.edit.edits import apply_edit, edit_parts, parse_edits

SOURCE = "def f(x):\n    if x:\n        return 1\n    return 2\n"


def test_blocks_with_paths_fences_and_copied_line_numbers():
    text = (
        "Sure:\n```python\npkg/mod.py\n<<<<<<< SEARCH\n   2|     if x:\n   3|         return 1\n=======\n"
        "   2|     if x > 0:\n   3|         return 1\n>>>>>>> REPLACE\n```\nother.py\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n"
    )
    parsed = parse_edits(text)
    assert parsed.problem is None
    assert [b.path for b in parsed.blocks] == ["pkg/mod.py", "other.py"]
    assert parsed.blocks[0].search == "    if x:\n        return 1"
    assert parsed.blocks[0].replace == "    if x > 0:\n        return 1"


def test_unreadable_answers_say_why():
    assert parse_edits("the code looks fine to me").problem == "no SEARCH/REPLACE block found"
    assert "divider" in (parse_edits("a.py\n<<<<<<< SEARCH\nx\n>>>>>>> REPLACE\n").problem or "")
    assert "end marker" in (parse_edits("a.py\n<<<<<<< SEARCH\nx\n=======\ny\n").problem or "")


def test_apply_exact_then_whitespace_then_indentation_tolerant():
    assert apply_edit(SOURCE, "        return 1", "        return 3") == SOURCE.replace(
        "return 1", "return 3"
    )
    assert apply_edit(
        SOURCE, "    if x:   \n        return 1", "    if x > 1:\n        return 1"
    ) == SOURCE.replace("if x:", "if x > 1:")
    # the model dropped the indentation: the replacement is re-indented to the file's
    out = apply_edit(SOURCE, "if x:\n    return 1", "if x is None:\n    return 0")
    assert out == "def f(x):\n    if x is None:\n        return 0\n    return 2\n"


def test_apply_refuses_what_does_not_match():
    with pytest.raises(ValueError, match="do not match"):
        apply_edit(SOURCE, "return 99", "return 1")
    with pytest.raises(ValueError, match="empty"):
        apply_edit(SOURCE, "  \n", "x")


def test_an_answer_that_ended_by_itself_may_omit_the_last_end_marker():
    text = "a.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n```\n"
    assert parse_edits(text).problem is not None  # possibly cut at the token cap: not trusted
    parsed = parse_edits(text, complete=True)
    assert parsed.problem is None and parsed.blocks[0].replace == "x = 2"


def test_an_edit_of_several_places_splits_into_one_part_per_change():
    before = {"m.py": "def f(x):\n    y = 2\n    if x >= 3:\n        return y\n    return 0\n", "n.py": "a = 1\n"}
    after = {"m.py": "def f(x, y=Cache):\n    y = 2\n    if x > 3:\n        return y\n    return 0\n",
             "n.py": "a = 2\n"}
    parts = edit_parts(before, after, limit=4)
    assert parts == [
        {"m.py": "def f(x, y=Cache):\n    y = 2\n    if x >= 3:\n        return y\n    return 0\n"},
        {"m.py": "def f(x):\n    y = 2\n    if x > 3:\n        return y\n    return 0\n"},
        {"n.py": "a = 2\n"},
    ]
    assert edit_parts(before, after, limit=2) == []  # three changes: a rewrite, not a fix with a slip
    one = {"m.py": before["m.py"].replace(">=", ">")}
    assert edit_parts(before, one, limit=4) == []  # nothing to split
    # a part that leaves the file unparsable (half of an if/else) is not a candidate
    broken_before = {"m.py": "if a:\n    x = 1\nz = 0\nz = 0\nb = 2\n"}
    broken_after = {"m.py": "if a:\n    pass\nz = 0\nz = 0\nb = 3\n"}
    assert len(edit_parts(broken_before, broken_after, limit=4)) == 2
    unparsable = {"m.py": "if a:\nz = 0\nz = 0\nb = 3\n"}
    assert edit_parts(broken_before, unparsable, limit=4) == [{"m.py": "if a:\n    x = 1\nz = 0\nz = 0\nb = 3\n"}]
