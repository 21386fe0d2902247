"""benchmarks/repair_infill.py, the fill-in-the-middle probe: the hole is the gold patch's first run of changed
lines (a replacement's old lines, an insertion's place); an answer that writes on past the hole is cut where it
starts repeating the code after it, or (reader `block`) where it leaves the hole's block; a fill is read as a
noop, an apply error or a patch."""

from __future__ import annotations

from tests.core.test_edit_bench import PATCH
from tests.swe_fixtures import benchmark

REPLACE = PATCH + """@@ -20,3 +20,3 @@
 x = 1
-y = 2
+y = 3
"""
INSERT = """--- a/lru.py
+++ b/lru.py
@@ -30,4 +30,5 @@
         self.stats.hits += 1
+        self._data.move_to_end(key)
         return value
"""


def test_the_hole_is_the_first_run_of_changed_lines():
    edit = benchmark("repair_edit")  # the probes' one reader of a gold patch's first changed lines
    assert edit.first_hole(REPLACE) == ("calc.py", 4, ["    for item in items[1:]:"])  # the second hunk waits
    assert edit.first_hole(INSERT) == ("lru.py", 31, [])  # an insertion: no old lines, the line it goes before


def test_an_answer_is_cut_where_it_repeats_the_code_after_the_hole():
    bench = benchmark("repair_infill")
    after = ["        result += item\n", "    return result\n"]
    run_on = "    for item in items:\n        result += item\n    return result\n\n\ndef mean(items):\n"
    assert bench.cut_at_suffix(run_on, after) == "    for item in items:\n"
    assert bench.cut_at_suffix("    for item in items:\n", after) == "    for item in items:\n"
    # a line that only looks like the next one, not followed by the one after it, is kept
    looks = "    for item in items:\n        result += item\n        count += 1\n"
    assert bench.cut_at_suffix(looks, after) == looks


def test_the_block_reader_ends_a_fill_where_it_leaves_the_holes_block():
    bench = benchmark("repair_infill")
    left = '    if not ok:\n        raise ValueError("no")\n    return x\n\n\nclass Next:\n    pass\n'
    assert bench.cut_at_block_end(left, 4) == '    if not ok:\n        raise ValueError("no")\n    return x\n\n\n'
    assert bench.cut_at_block_end("    return x\n```\n\nSome prose.\n", 4) == "    return x\n"
    assert bench.cut_at_block_end("    return x\n", 4) == "    return x\n"


def test_a_fill_is_read_as_noop_apply_error_or_a_patch(tmp_path):
    bench = benchmark("repair_infill")
    source = "def total(items):\n    result = 0\n    for item in items[1:]:\n        result += item\n    return result\n"
    (tmp_path / "calc.py").write_text(source)
    patch = ("--- a/calc.py\n+++ b/calc.py\n@@ -2,4 +2,4 @@\n     result = 0\n-    for item in items[1:]:\n"
             "+    for item in items:\n         result += item\n     return result\n")
    task = type("Task", (), {"patch": patch})()
    hole, = bench.holes_of(task, tmp_path, "gold")
    assert (hole.path, hole.start, hole.removed, hole.indent) == ("calc.py", 3, ["    for item in items[1:]:"], 4)
    assert bench.read_fill("    for item in items[1:]:\n", hole, "suffix") == ("noop", "")
    assert bench.read_fill("    for item in (items:\n", hole, "suffix") == ("apply_error", "")
    status, fixed = bench.read_fill("    for item in items:\n        result += item\n    return result\n", hole, "suffix")
    assert status == "ok" and "-    for item in items[1:]:\n+    for item in items:\n" in fixed
    run_on = "    for item in items:\n        total += 1\n\n\ndef other():\n    pass\n"  # writes on, not the suffix
    assert bench.read_fill(run_on, hole, "suffix")[0] == "apply_error"  # the function is cut in two
    assert bench.read_fill(run_on, hole, "block")[0] == "ok"


def test_statement_holes_cover_the_function_one_statement_each_and_know_the_gold_ones(tmp_path):
    bench = benchmark("repair_infill")
    source = ('def total(items):\n    """Sum."""\n    result = 0\n    for item in items[1:]:\n'
              '        if item:\n            result += item\n    return result\n')
    (tmp_path / "calc.py").write_text(source)
    assert bench.statement_spans(source, 4) == [(1, 1), (3, 3), (4, 4), (5, 5), (6, 6), (7, 7)]  # no docstring
    patch = ("--- a/calc.py\n+++ b/calc.py\n@@ -3,2 +3,2 @@\n     result = 0\n-    for item in items[1:]:\n"
             "+    for item in items:\n")
    holes = bench.holes_of(type("Task", (), {"patch": patch})(), tmp_path, "statements")
    assert [(h.lines, h.on_gold) for h in holes] == [("1-1", False), ("3-3", False), ("4-4", True), ("5-5", False),
                                                     ("6-6", False), ("7-7", False)]
    assert holes[2].removed == ["    for item in items[1:]:"] and holes[2].indent == 4
    inserted = ("--- a/calc.py\n+++ b/calc.py\n@@ -6,2 +6,3 @@\n             result += item\n"
                "+    result = round(result)\n     return result\n")  # an insertion: the lines beside it are gold
    holes = bench.holes_of(type("Task", (), {"patch": inserted})(), tmp_path, "statements")
    assert [h.lines for h in holes if h.on_gold] == ["6-6", "7-7"]
