"""The rewrite edit format: the model gets one window at column 0 and answers with the corrected code."""

from __future__ import annotations

from agentflow.repair.config import load_repair_config, run_values_for, with_setting
from agentflow.repair.edit.steps import edit_prompt, public_api, read_rewrite
from agentflow.repair.locate.localize import Window
from agentflow.repair.nodetypes.rollout import SweEditSettings

SOURCE = '''class Stats:
    def __init__(self):
        self.hits = 0
        self.misses = 0

    def hit_rate(self):
        return self.hits / (self.hits + self.misses)
'''
SOURCES = {"pkg/__init__.py": "from .stats import Stats\n__version__ = '1'\n", "pkg/stats.py": SOURCE}
WINDOW = Window("pkg/stats.py", 6, 7, 5.0, "hit_rate")


def edit_settings(items: list[str]) -> SweEditSettings:
    """The settings a `swe.edit` node runs with under the run's `-c` items (the run's values of its settings)."""
    return SweEditSettings.model_validate(run_values_for(load_repair_config(items), SweEditSettings.model_fields))


def test_the_answer_replaces_the_window_reindented():
    answer = "Here:\n```python\ndef hit_rate(self):\n    total = self.hits + self.misses\n    return self.hits / total if total else 0.0\n```"
    read = read_rewrite(answer, SOURCES, WINDOW)
    assert read.status == "ok"
    assert read.files["pkg/stats.py"].endswith(
        "    def hit_rate(self):\n        total = self.hits + self.misses\n"
        "        return self.hits / total if total else 0.0\n"
    )
    assert read.files["pkg/stats.py"].startswith("class Stats:\n    def __init__(self):\n")


def test_a_method_given_back_inside_its_class_header_replaces_only_the_method():
    answer = ("```python\nclass Stats:\n    def hit_rate(self):\n        total = self.hits + self.misses\n"
              "        return self.hits / total if total else 0.0\n```")
    read = read_rewrite(answer, SOURCES, WINDOW)
    assert read.status == "ok"
    assert read.files["pkg/stats.py"].count("class Stats:") == 1
    assert read.files["pkg/stats.py"].endswith("    def hit_rate(self):\n        total = self.hits + self.misses\n"
                                                "        return self.hits / total if total else 0.0\n")


def test_a_quoted_line_before_the_corrected_code_is_not_taken_for_the_rewrite():
    answer = ("The line `return self.hits / (self.hits + self.misses)` divides by zero:\n"
              "```python\nreturn self.hits / (self.hits + self.misses)\n```\nFixed:\n"
              "```python\ndef hit_rate(self):\n    total = self.hits + self.misses\n"
              "    return self.hits / total if total else 0.0\n```\n")
    read = read_rewrite(answer, SOURCES, WINDOW)
    assert read.status == "ok" and "if total else 0.0" in read.files["pkg/stats.py"]
    only_quote = "```python\nreturn 0.0\n```"  # no `def hit_rate`: a quote, not the function rewritten
    assert read_rewrite(only_quote, SOURCES, WINDOW).status == "noop"


def test_only_the_rewritten_function_is_taken_with_the_standard_imports_it_needs():
    # small models wrap the function in invented imports, the issue's snippet and usage examples
    answer = ("```python\nimport math\nfrom cachetools import TTLCache\nfrom pkg.stats import Stats\ncalls = 0\n\n"
              "def hit_rate(self):\n    total = self.hits + self.misses\n"
              "    return self.hits / total if total else math.nan\n\nprint(Stats().hit_rate())\n```")
    read = read_rewrite(answer, SOURCES, WINDOW)
    assert read.status == "ok"
    assert read.files["pkg/stats.py"] == "import math\n" + SOURCE.replace(
        "        return self.hits / (self.hits + self.misses)\n",
        "        total = self.hits + self.misses\n        return self.hits / total if total else math.nan\n")
    # the function given back unchanged among additions is no candidate
    padded = "```python\nfrom pkg.stats import Stats\n\ndef hit_rate(self):\n    return self.hits / (self.hits + self.misses)\n```"
    assert read_rewrite(padded, SOURCES, WINDOW).status == "noop"


def test_a_whole_function_before_the_cut_of_a_block_that_does_not_parse_is_the_rewrite():
    """An answer that pastes test output around the function, or writes on until max_tokens cuts it: the
    function alone parses, so it is taken; a function the cut may have reached is not."""
    fixed = "def hit_rate(self):\n    total = self.hits + self.misses\n    return self.hits / total if total else 0.0\n"
    pasted = ("```python\ndef test_rate():\n    assert Stats().hit_rate() == 0.0\ntest/test_stats.py:3:\n"
              "E   ZeroDivisionError\n\n" + fixed + "\ndef summary(self):\n    return (self.hits,\n")  # cut here
    read = read_rewrite(pasted, SOURCES, WINDOW)
    assert read.status == "ok"
    assert read.files["pkg/stats.py"] == SOURCE.replace(
        "        return self.hits / (self.hits + self.misses)\n",
        "        total = self.hits + self.misses\n        return self.hits / total if total else 0.0\n")
    # the function runs to the end of the cut block: its last lines may be missing, so it is not taken
    cut_inside = "```python\nprint(Stats(\n\n" + fixed.rsplit("\n    return", 1)[0] + "\n"
    assert read_rewrite(cut_inside, SOURCES, WINDOW).status == "apply_error"


def test_unchanged_unreadable_and_broken_answers_are_not_candidates():
    same = "```python\ndef hit_rate(self):\n    return self.hits / (self.hits + self.misses)\n```"
    assert read_rewrite(same, SOURCES, WINDOW).status == "noop"
    assert read_rewrite("The code looks correct to me.", SOURCES, WINDOW).status == "unparsable"
    broken = "```python\ndef hit_rate(self:\n    return 0\n```"
    read = read_rewrite(broken, SOURCES, WINDOW)
    assert read.status == "apply_error" and "does not parse" in read.errors[0]
    # which of them say the model left the window alone (the search then looks at another suspect)
    example = "```python\nfrom pkg import Stats\nprint(Stats().hit_rate())\n```"  # the issue's example back
    assert read_rewrite(example, SOURCES, WINDOW).status == "noop"
    assert [read_rewrite(a, SOURCES, WINDOW).declined for a in (same, example, "No code.", broken)] == [
        True, True, False, False]


def test_the_prompt_shows_the_window_at_column_zero():
    cfg = edit_settings(["edit.format=rewrite"])
    prompt = edit_prompt(cfg, SOURCES, "hit_rate raises ZeroDivisionError on a new Stats", "", focus=0)
    text = prompt.user
    assert prompt.window is not None and prompt.window.symbol == "Stats.hit_rate"
    assert "```python\ndef hit_rate(self):\n    return self.hits" in text
    # the answer's opening is named, so the model gives the function back rather than the issue's example
    assert "block, starting with `def hit_rate(` and nothing else" in " ".join(text.split())


def test_a_window_that_is_not_a_function_names_no_opening():
    cfg = edit_settings(["edit.format=rewrite"])
    lines = Window("pkg/__init__.py", 1, 2, 5.0, None)
    prompt = edit_prompt(cfg, SOURCES, "the version is wrong", "", windows=[lines])
    text = " ".join(prompt.user.split())
    assert "starting with" not in text and "```python block and nothing else" in text


def test_public_api_lists_what_a_script_may_import_and_how_to_call_it():
    # private names (__version__) are left out; methods are shown without self
    assert public_api(SOURCES) == "from pkg import Stats\n    Stats()\n    Stats.hit_rate()"
    sources = {"lib/__init__.py": "from lib.core import Parser, parse\n",
               "lib/core.py": ('class Parser:\n    def __init__(self, text, *, strict=False):\n        pass\n'
                               '    @classmethod\n    def load(cls, path):\n        """Read a file."""\n'
                               'def parse(text, sep=","):\n    """Parse text into fields."""\n')}
    assert public_api(sources).split("\n")[1:] == [
        "    Parser(text, *, strict=False)", "    Parser.load(path)", "    parse(text, sep=',')  # Parse text into fields.",
    ]


def test_planner_and_reproduction_prompts_show_code_whatever_the_edit_format():
    from agentflow.repair.edit.steps import code_windows

    cfg = edit_settings(["edit.format=rewrite"])
    text, path = code_windows(cfg, SOURCES, "hit_rate raises ZeroDivisionError", "", focus=0, budget_chars=4000)
    assert path == "pkg/stats.py" and "def hit_rate(self):" in text


def test_auto_edit_format_uses_tools_only_for_models_that_say_they_call_tools():
    from types import SimpleNamespace

    from agentflow.repair.edit.steps import edit_format_for

    cfg = load_repair_config()
    assert cfg.edit.format == "auto"
    assert edit_format_for(cfg, SimpleNamespace(spec="openai:gpt-4o-mini")) == "tools"
    assert edit_format_for(cfg, SimpleNamespace(spec="anthropic:claude-sonnet-4-5")) == "tools"
    # an OpenAI-compatible server says nothing: the text format small local models handle
    assert edit_format_for(cfg, SimpleNamespace(spec="openai-compatible:http://127.0.0.1:8080/v1#m")) == "rewrite"
    local = SimpleNamespace(spec="local:qwen2.5-coder-1.5b", profile=SimpleNamespace(tool_calling=False))
    assert edit_format_for(cfg, SimpleNamespace(spec="batched", inner=local)) == "rewrite"
    served = SimpleNamespace(spec="openai-compatible:x#y", profile=SimpleNamespace(tool_calling=True))
    assert edit_format_for(cfg, served) == "tools"
    assert edit_format_for(with_setting(cfg, "edit.format", "search_replace"), served) == "search_replace"


def test_samples_rotate_over_the_suspects_unless_a_traceback_points_into_the_code():
    from agentflow.repair.edit.steps import suspects

    cfg = edit_settings(["windows=3"])
    source = ("def load(text):\n    return parse(text)\n\n\ndef parse(text):\n    return text.split('=')\n\n\n"
              "def dump(data):\n    return '='.join(data)\n")
    sources = {"kit/core.py": source}
    # all three named, so they score well above a traceback frame's score, yet no traceback points at them
    issue = "`load` `load` `load` `load` fails: `parse` and `dump` are involved, load(), load()"
    ranked = suspects(cfg, sources, issue, "", focus=0)
    assert ranked[0].score > 10 and not any(w.frame for w in ranked)
    firsts = [suspects(cfg, sources, issue, "", focus=f)[0].symbol for f in range(4)]
    assert firsts == [ranked[0].symbol, ranked[1].symbol, ranked[0].symbol, ranked[2].symbol]
    failure = 'Traceback (most recent call last):\n  File "/workspace/kit/core.py", line 6, in parse\nValueError: x\n'
    with_frame = [[w.symbol for w in suspects(cfg, sources, issue, failure, focus=f)] for f in range(4)]
    # the frame's window, then only the best window without a frame (here `load`, which calls parse)
    assert all(sorted(ws) == ["load", "parse"] for ws in with_frame)
    assert [ws[0] for ws in with_frame] == ["parse", "load", "parse", "parse"]  # the frame first most often


def test_the_rewrite_prompt_shows_the_rest_of_a_short_file_and_lists_a_long_one_when_asked():
    from agentflow.repair.locate.localize import file_context, file_outline

    cfg = edit_settings(["edit.format=rewrite"])
    prompt = edit_prompt(cfg, SOURCES, "hit_rate raises ZeroDivisionError on a new Stats", "", focus=0)
    text = prompt.user
    # the small file is shown whole, with the window to rewrite marked instead of repeated
    assert "The rest of pkg/stats.py:\n```python\nclass Stats:\n    def __init__(self):\n        self.hits = 0" in text
    assert "    # ... Stats.hit_rate (lines 6-7, given below) ..." in text
    assert text.count("return self.hits / (self.hits + self.misses)") == 1
    off = edit_prompt(cfg.model_copy(update={"file_context_lines": 0}), SOURCES, "hit_rate fails", "", focus=0)
    assert "The rest of" not in off.user
    # a long file: what it defines, as a list (not code a small model would copy back)
    body = "\n".join(f"    x{i} = {i}" for i in range(30))
    source = (f'"""Doc."""\nimport re\n\nLIMIT = 3\n\n\nclass ParseError(ValueError):\n    def where(self):\n        pass\n\n\n'
              f"def parse(text, *, strict=False):\n{body}\n    return x1\n\n\ndef dump(data):\n{body}\n    return ''\n")
    window = Window("m.py", 46, 77, 1.0, "dump")
    assert file_context(source, window, max_lines=20) == ""
    assert file_outline(source, window, max_items=20).split("\n") == [
        "- imports: re", "- module-level names: LIMIT", "- class ParseError(ValueError): methods where",
        "- function parse(text, *, strict=False)"]
    long_sources = {"m.py": source}
    listed = cfg.model_copy(update={"file_context_lines": 20, "file_outline": True})
    prompt = edit_prompt(listed, long_sources, "dump gives the wrong value", "", focus=0)
    text = prompt.user
    assert prompt.window is not None and prompt.window.symbol == "dump"
    assert "What else m.py defines (its code is not shown):\n- imports: re\n" in text
    assert text.count("```python\n") == 1  # one code block: the window to rewrite
    unlisted = cfg.model_copy(update={"file_context_lines": 20})  # the default: no list
    assert "What else m.py defines" not in edit_prompt(unlisted, long_sources, "dump gives the wrong value", "",
                                                       focus=0).user
    assert "The rest of pkg/stats.py:" in edit_prompt(unlisted, SOURCES, "hit_rate fails", "", focus=0).user


def test_a_rewrite_of_a_long_window_may_answer_past_max_tokens_to_give_it_back_whole():
    cfg = edit_settings(["edit.format=rewrite"])
    short = edit_prompt(cfg, SOURCES, "hit_rate raises ZeroDivisionError on a new Stats", "", focus=0)
    assert short.max_tokens(cfg.max_tokens) == cfg.max_tokens  # a small window fits the cap
    # a 30-line function of long lines (tabulate, semver): ~2,700 characters, ~770 tokens to give back
    body = "".join(f"    value_{i} = compute_something_long(argument_one, argument_two, option={i})  # note\n"
                   for i in range(29))
    sources = {"pkg/wide.py": f"def wide(argument_one, argument_two):\n{body}"}
    long = edit_prompt(cfg, sources, "wide gives the wrong value", "", focus=0)
    assert long.window is not None and long.window.symbol == "wide"
    assert long.max_tokens(cfg.max_tokens) >= len(long.snippet) // 4 > cfg.max_tokens


LONG = '''"""Tables."""


def helper(x):
    return x


def render(rows, sep="  "):
    """Return the table as one string."""
    widths = [0] * len(rows[0])
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(str(cell)))
    out = []
    for row in rows:
        out.append(sep.join(str(cell).ljust(w) for cell, w in zip(row, widths)))
    return "\\n".join(out)
'''
LONG_SOURCES = {"tab/render.py": LONG}
PART = Window("tab/render.py", 10, 17, 5.0, "render")  # the body after the docstring: a long function's window
FIXED = LONG.replace(".ljust(w)", ".rjust(w)")
FIXED_LINES = FIXED.split("\n")
DEF, BODY = FIXED_LINES[7], FIXED_LINES[9:17]  # `def render(...)`, the statements after the docstring


def answer(lines: list[str]) -> str:
    return "```python\n" + "\n".join(lines) + "\n```"


def test_a_long_function_given_back_whole_replaces_the_function_not_its_window():
    # tabkit's 32-line `render` is shown as lines 14-43; the model gave back the module's preamble, the helper
    # and the whole function (without its docstring), which used to land inside the window: render nested in render
    text = answer(['"""Tables."""', "import csv", "", "", *FIXED_LINES[3:6], "", DEF,
                   "    # ... render (lines 10-17, given below) ...", *BODY])
    read = read_rewrite(text, LONG_SOURCES, PART)
    assert read.status == "ok", read.errors
    assert read.files["tab/render.py"] == FIXED  # docstring kept; no unused csv import, no copied marker


def test_a_body_fragment_for_a_long_function_still_replaces_the_window():
    read = read_rewrite(answer([line[4:] for line in BODY]), LONG_SOURCES, PART)
    assert read.status == "ok", read.errors
    assert read.files["tab/render.py"] == FIXED


def test_a_whole_function_answer_without_its_docstring_keeps_the_docstring():
    read = read_rewrite(answer([DEF, *BODY]), LONG_SOURCES, Window("tab/render.py", 8, 17, 5.0, "render"))
    assert read.status == "ok", read.errors
    assert read.files["tab/render.py"] == FIXED


def test_the_window_statements_wrapped_in_the_def_line_replace_only_the_window():
    # a long function's window shown alone: the model wraps its statements in the function's `def` line and
    # leaves the rest out; taking that for the whole function would delete the rest
    read = read_rewrite(answer([DEF, *BODY[5:]]), LONG_SOURCES, Window("tab/render.py", 15, 17, 5.0, "render"))
    assert read.status == "ok", read.errors
    assert read.files["tab/render.py"] == FIXED


def test_a_decorator_the_answer_left_out_is_kept():
    source = 'class Stats:\n    @property\n    def hit_rate(self):\n        return self.hits / self.lookups\n'
    window = Window("pkg/stats.py", 2, 4, 5.0, "Stats.hit_rate")
    text = answer(["def hit_rate(self):", "    return self.hits / self.lookups if self.lookups else 0.0"])
    read = read_rewrite(text, {"pkg/stats.py": source}, window)
    assert read.status == "ok", read.errors
    assert read.files["pkg/stats.py"] == source.replace("self.lookups\n", "self.lookups if self.lookups else 0.0\n")


FAILING_REPORT = """`tests/test_stats.py::test_rate` fails

```
tests/test_stats.py:5: in test_rate
    assert Stats().hit_rate() == 0.0
E   ZeroDivisionError: division by zero
```
"""


def test_the_reports_failure_is_shown_directly_above_the_code_when_asked():
    for fmt in ("rewrite", "search_replace"):
        plain = edit_prompt(edit_settings([f"edit.format={fmt}"]), SOURCES, FAILING_REPORT, "", windows=[WINDOW])
        assert plain.user.count("ZeroDivisionError: division by zero") == 1  # the report's own copy
        cfg = edit_settings([f"edit.format={fmt}"]).model_copy(update={"failure_above_code": True})
        shown = edit_prompt(cfg, SOURCES, FAILING_REPORT, "", windows=[WINDOW])
        assert shown.user.count("ZeroDivisionError: division by zero") == 2
        above = shown.user.rindex("ZeroDivisionError: division by zero")
        code = shown.user.index("This is `hit_rate`" if fmt == "rewrite" else "Find the line")
        assert 0 < code - above < 80  # right above the code (rewrite) or the instruction (search_replace)


def test_a_report_without_failure_output_shows_nothing_more_above_the_code():
    cfg = edit_settings(["edit.format=rewrite"])
    issue = "hit_rate() divides by zero when nothing was counted yet."
    plain = edit_prompt(cfg, SOURCES, issue, "", windows=[WINDOW])
    asked = edit_prompt(cfg.model_copy(update={"failure_above_code": True}), SOURCES, issue, "", windows=[WINDOW])
    assert asked.user == plain.user
