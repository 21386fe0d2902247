"""benchmarks/repair_edit.py, the edit probe: its prompt is the repair's first edit prompt (a failing-test
report's failure shown as the tests' results), its answers are read as the repair reads them, and its figures
(pass@1, coverage, the noop share) are given per group of tasks."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import ModuleType

from agentflow.models.base import ChatRequest
from agentflow.models.testing import FunctionModel
from agentflow.repair.config import load_repair_config
from agentflow.swe import SWETask
from tests.swe_fixtures import benchmark

ROOT = Path(__file__).resolve().parents[2]

SOURCE = '''def total(items):
    """The sum of the items."""
    result = 0
    for item in items[1:]:
        result += item
    return result
'''
FIXED = SOURCE.replace("items[1:]", "items")
PATCH = """--- a/calc.py
+++ b/calc.py
@@ -2,5 +2,5 @@
     \"\"\"The sum of the items.\"\"\"
     result = 0
-    for item in items[1:]:
+    for item in items:
         result += item
     return result
"""
REPORT = """`tests/test_calc.py::test_total` fails

CI fails on the current code. Failing tests:

- `tests/test_calc.py::test_total`

The output for `tests/test_calc.py::test_total`:

```
tests/test_calc.py:4: in test_total
    assert total([1, 2, 3]) == 6
E   assert 5 == 6
E    +  where 5 = total([1, 2, 3])
```
"""
EXAMPLES = """total() drops the first item:

>>> total([1, 2, 3])
5

It should be 6.
"""


def edit_bench() -> ModuleType:
    """benchmarks/repair_edit.py as a module (it imports repair_resolve from its own folder)."""
    return benchmark("repair_edit")


def task_repo(tmp_path: Path, statement: str) -> tuple[SWETask, Path]:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(SOURCE)
    (repo / "tests" / "test_calc.py").write_text("from calc import total\n\ndef test_total():\n"
                                                 "    assert total([1, 2, 3]) == 6\n")
    task = SWETask(instance_id="acme__calc-1", repo="repo", base_commit="HEAD", problem_statement=statement,
                   FAIL_TO_PASS=["tests/test_calc.py::test_total"], patch=PATCH)
    return task, repo


def test_a_failing_test_report_is_shown_as_the_tests_results_and_examples_are_not(tmp_path: Path):
    bench = edit_bench()
    feedback = bench.first_feedback(REPORT)
    assert "E   assert 5 == 6" in feedback
    assert "tests/test_calc.py:4: in test_total" in feedback
    assert bench.first_feedback(EXAMPLES) == ""


def test_the_prompt_is_the_repairs_and_answers_are_read_as_the_repair_reads_them(tmp_path: Path):
    bench = edit_bench()
    task, repo = task_repo(tmp_path, REPORT)
    answers = iter([f"```python\n{SOURCE}```", f"```python\n{FIXED}```"])
    model = FunctionModel(lambda request: next(answers))
    cfg = bench.edit_settings(load_repair_config(["edit.format=rewrite"]), model)
    result = asyncio.run(bench.sample_task(model, cfg, task, repo, 2))
    request: ChatRequest = model.last_request
    assert request.n == 2
    user = request.messages[-1].content or ""
    assert "Test results of the current code:" in user and "E   assert 5 == 6" in user
    assert "for item in items[1:]:" in user
    assert result["statuses"] == ["noop", "ok"]
    assert len(result["patches"]) == 1 and "+    for item in items:" in result["patches"][0]
    assert result["window"].startswith("calc.py:1-6 total")


def test_search_replace_answers_are_read_as_blocks(tmp_path: Path):
    bench = edit_bench()
    task, repo = task_repo(tmp_path, EXAMPLES)
    block = "calc.py\n<<<<<<< SEARCH\n    for item in items[1:]:\n=======\n    for item in items:\n>>>>>>> REPLACE\n"
    model = FunctionModel(lambda request: block)
    cfg = bench.edit_settings(load_repair_config(["edit.format=search_replace"]), model)
    result = asyncio.run(bench.sample_task(model, cfg, task, repo, 1))
    assert cfg.edit_format == "search_replace"
    assert "Test results of the current code:" not in (model.last_request.messages[-1].content or "")
    assert result["statuses"] == ["ok"]


def test_node_settings_given_for_every_node_or_the_edit_node_reach_the_probe():
    bench = edit_bench()
    model = FunctionModel(lambda request: "")
    cfg = load_repair_config(["edit.format=rewrite", "file_context_lines=0", "nodes.edit.file_outline=true"])
    settings = bench.edit_settings(cfg, model)
    assert (settings.file_context_lines, settings.file_outline) == (0, True)


def test_figures_per_group_count_noops_resolving_answers_and_covered_tasks():
    bench = edit_bench()
    results = {"alpha__a-1": {"statuses": ["ok", "noop"]}, "alpha__a-2": {"statuses": ["noop", "noop"]},
               "beta__b-1": {"statuses": ["ok", "apply_error"]}}
    resolved = {"alpha__a-1": 1, "alpha__a-2": 0, "beta__b-1": 0}
    groups = bench.grouped(results, resolved, lambda iid: iid.split("__")[0])
    assert groups["alpha"]["noop_share"] == 0.75
    assert (groups["alpha"]["pass_at_1"], groups["alpha"]["coverage"]) == (0.25, 0.5)
    assert groups["beta"] == {"tasks": 1, "answers": 2, "resolved_answers": 0, "pass_at_1": 0.0, "coverage": 0.0,
                              "statuses": {"apply_error": 1, "ok": 1}, "noop_share": 0.0}


def test_a_sampling_run_written_reads_back_as_it_was(tmp_path: Path):
    bench = edit_bench()
    run = {"model": "m", "tasks_file": "/x/tasks.jsonl", "samples_per_task": 2, "sampling_s": 1.5}
    results = {"acme__calc-1": {"statuses": ["ok", "noop"], "patches": ["diff"], "kind": "failing_tests"}}
    bench.write_answers(str(tmp_path / "answers.jsonl"), run, results)
    assert bench.read_answers(str(tmp_path / "answers.jsonl")) == (run, results)


def test_the_gold_window_of_a_long_function_holds_whole_statements():
    bench = edit_bench()
    body = "".join(f"    v{i} = {i}\n" for i in range(30))
    call = "    total = sum([\n" + "".join(f"        v{i},\n" for i in range(7)) + "    ])\n"
    source = f'def long():\n    """Doc."""\n{body}{call}    return total\n'
    lines = source.split("\n")
    changed = lines.index("        v6,") + 1
    patch = f"--- a/m.py\n+++ b/m.py\n@@ -{changed},1 +{changed},1 @@\n-        v6,\n+        v7,\n"
    task = SWETask(instance_id="acme__m-1", repo="repo", base_commit="HEAD", FAIL_TO_PASS=["t"], patch=patch)
    window = bench.gold_window(task, {"m.py": source}, 10)
    # the multi-line call is shown from its first line (a window cut inside it cannot be rewritten)
    assert window.start <= lines.index("    total = sum([") + 1 and window.end >= changed
    assert window.symbol == "long" and window.end - window.start + 1 <= 10
