"""benchmarks/repair_infill.py, the fill-in-the-middle probe: the hole is the gold patch's first run of changed
lines (a replacement's old lines, an insertion's place), and an answer that writes on past the hole is cut where
it starts repeating the code after it."""

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
    bench = benchmark("repair_infill")
    assert bench.first_hole(REPLACE) == ("calc.py", 4, ["    for item in items[1:]:"])  # the second hunk waits
    assert bench.first_hole(INSERT) == ("lru.py", 31, [])  # an insertion: no old lines, the line it goes before


def test_an_answer_is_cut_where_it_repeats_the_code_after_the_hole():
    bench = benchmark("repair_infill")
    after = ["        result += item\n", "    return result\n"]
    run_on = "    for item in items:\n        result += item\n    return result\n\n\ndef mean(items):\n"
    assert bench.cut_at_suffix(run_on, after) == "    for item in items:\n"
    assert bench.cut_at_suffix("    for item in items:\n", after) == "    for item in items:\n"
    # a line that only looks like the next one, not followed by the one after it, is kept
    looks = "    for item in items:\n        result += item\n        count += 1\n"
    assert bench.cut_at_suffix(looks, after) == looks
