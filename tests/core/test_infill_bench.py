"""benchmarks/repair_infill.py, the fill-in-the-middle probe: the hole is the gold patch's first run of changed
lines (a replacement's old lines, an insertion's place), and an answer that writes on past the hole is cut where
it starts repeating the code after it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def infill_bench() -> ModuleType:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("repair_infill", ROOT / "benchmarks" / "repair_infill.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


REPLACE = """--- a/calc.py
+++ b/calc.py
@@ -2,5 +2,5 @@
     \"\"\"The sum of the items.\"\"\"
     result = 0
-    for item in items[1:]:
+    for item in items:
         result += item
     return result
@@ -20,3 +20,3 @@
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
    bench = infill_bench()
    assert bench.first_hole(REPLACE) == ("calc.py", 4, ["    for item in items[1:]:"])  # the second hunk waits
    assert bench.first_hole(INSERT) == ("lru.py", 31, [])  # an insertion: no old lines, the line it goes before


def test_an_answer_is_cut_where_it_repeats_the_code_after_the_hole():
    bench = infill_bench()
    after = ["        result += item\n", "    return result\n"]
    run_on = "    for item in items:\n        result += item\n    return result\n\n\ndef mean(items):\n"
    assert bench.cut_at_suffix(run_on, after) == "    for item in items:\n"
    assert bench.cut_at_suffix("    for item in items:\n", after) == "    for item in items:\n"
    # a line that only looks like the next one, not followed by the one after it, is kept
    looks = "    for item in items:\n        result += item\n        count += 1\n"
    assert bench.cut_at_suffix(looks, after) == looks
