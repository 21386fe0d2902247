"""The tagged edit format: the window's lines shown after their line numbers, the answer naming the lines it
replaces and giving their new code (`agentflow.repair.edit.tagged`, `steps.read_tagged`)."""

from __future__ import annotations

import ast
import random
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from agentflow.repair.edit.steps import edit_prompt, read_answer, read_tagged
from agentflow.repair.edit.tagged import named_lines, tagged_lines
from agentflow.repair.locate.focus import FocusSchedule
from agentflow.repair.locate.localize import Window, symbols
from agentflow.repair.nodetypes.rollout import Approach, SweEditSettings
from agentflow.repair.nodetypes.trajectory import TrajectorySettings

SOURCE = '''class Stats:
    def __init__(self):
        self.hits = 0
        self.misses = 0

    def hit_rate(self):
        return self.hits / (self.hits + self.misses)
'''
SOURCES = {"pkg/__init__.py": "from .stats import Stats\n__version__ = '1'\n", "pkg/stats.py": SOURCE}
WINDOW = Window("pkg/stats.py", 6, 7, 5.0, "Stats.hit_rate")
GUARDED = SOURCE.replace("        return self.hits / (self.hits + self.misses)\n",
                         "        total = self.hits + self.misses\n        return self.hits / total if total else 0.0\n")
FIX = "```python\n    total = self.hits + self.misses\n    return self.hits / total if total else 0.0\n```"


def fixed(text: str) -> str:
    read = read_tagged(text, SOURCES, WINDOW)
    assert read.status == "ok", read.errors
    return read.files["pkg/stats.py"]


@pytest.mark.parametrize("header", ["Replace line 7:", "Replace lines 7-7:", "Line 7:", "7:", "lines 7 to 7",
                                    "Replace line 7 with:", "The division fails on an empty Stats.\nReplace line 7:"])
def test_the_ways_small_models_name_a_line_are_read(header: str) -> None:
    assert fixed(f"{header}\n{FIX}") == GUARDED
    assert fixed(f"{header}\n{FIX}".replace("\n", "\r\n")) == GUARDED  # Windows line ends


def test_ranges_are_read_in_their_usual_spellings() -> None:
    assert [named_lines(s) for s in ("12", "12-13", "12 to 13", "12, 13", "12 and 13", "12–14", "13-12")] == [
        (12, 12), (12, 13), (12, 13), (12, 13), (12, 13), (12, 14), (12, 13)]
    with pytest.raises(ValueError, match="not one run of lines"):
        named_lines("12, 14")


def test_copied_tags_are_stripped_and_name_the_lines_without_a_header() -> None:
    tagged = "```python\n7|     total = self.hits + self.misses\n7|     return self.hits / total if total else 0.0\n```"
    assert fixed(tagged) == GUARDED
    assert fixed("Replace line 7:\n" + tagged) == GUARDED
    # the header written as the block's first comment line
    assert fixed(FIX.replace("```python\n", "```python\n# Replace line 7\n")) == GUARDED


def test_the_new_lines_are_indented_like_the_lines_they_replace_whatever_the_block_gives() -> None:
    for indent in ("", "    ", "        ", "            "):
        block = f"```python\n{indent}total = self.hits + self.misses\n{indent}return self.hits / total if total else 0.0\n```"
        assert fixed("Replace line 7:\n" + block) == GUARDED
    # a first line deeper than the next: kept relative to it, not dedented as a whole
    source = "def pick(items):\n    for item in items:\n        if item:\n            return item\n    return None\n"
    read = read_tagged("Replace lines 4-5:\n```python\n            return item\n    return items[0] if items else None\n```",
                       {"m.py": source}, Window("m.py", 1, 5, 1.0, "pick"))
    assert read.status == "ok", read.errors
    assert read.files["m.py"] == source.replace("    return None\n", "    return items[0] if items else None\n")


def test_insertion_deletion_and_several_replacements_bottom_up() -> None:
    source = "def total(prices, tax):\n    debug = True\n    subtotal = sum(prices)\n    return subtotal + tax\n"
    window, sources = Window("m.py", 1, 4, 1.0, "total"), {"m.py": source}
    answer = ("Replace line 2:\n```python\n```\n"  # delete
              "Replace line 4:\n```python\nreturn subtotal * (1 + tax)\n```\n"
              "Replace line 3:\n```python\nsubtotal = sum(prices)\nassert subtotal >= 0\n```")  # insert after 3
    read = read_tagged(answer, sources, window)
    assert read.status == "ok", read.errors
    assert read.files["m.py"] == ("def total(prices, tax):\n    subtotal = sum(prices)\n    assert subtotal >= 0\n"
                                  "    return subtotal * (1 + tax)\n")
    overlapping = "Replace lines 2-3:\n```python\npass\n```\nReplace line 3:\n```python\nx = 1\n```"
    read = read_tagged(overlapping, sources, window)
    assert read.status == "apply_error" and "overlap" in read.errors[0]
    # the same replacement given twice is one replacement
    twice = "Replace line 4:\n```python\nreturn 0\n```\nReplace line 4:\n```python\nreturn 0\n```"
    assert read_tagged(twice, sources, window).status == "ok"


def test_unchanged_outside_unreadable_and_broken_answers() -> None:
    same = "Replace line 7:\n```python\n    return self.hits / (self.hits + self.misses)\n```"
    for answer in (same, "The code is correct.", "```python\nprint(Stats().hit_rate())\n```"):
        read = read_tagged(answer, SOURCES, WINDOW)
        assert read.status == "noop" and read.declined, (answer, read.errors)
    # a quote of the faulty line, tags and all, before the fix is no second replacement of the line
    assert fixed("The bug:\n```\n7|     return self.hits / (self.hits + self.misses)\n```\nReplace line 7:\n" + FIX) == GUARDED
    outside = read_tagged("Replace line 3:\n```python\nself.hits = 1\n```", SOURCES, WINDOW)
    assert outside.status == "apply_error" and outside.errors == ["line 3 is not in the code shown (lines 6-7)"]
    unreadable = read_tagged("Replace lines 6, 8:\n```python\npass\n```", SOURCES, WINDOW)
    assert unreadable.status == "unparsable" and len(unreadable.errors[0].split("\n")) == 1
    broken = read_tagged("Replace line 7:\n```python\nreturn (\n```", SOURCES, WINDOW)
    assert broken.status == "apply_error" and "does not parse" in broken.errors[0]


def test_a_window_given_back_whole_is_read_as_a_rewrite() -> None:
    whole = "```python\ndef hit_rate(self):\n    total = self.hits + self.misses\n    return self.hits / total if total else 0.0\n```"
    assert fixed(whole) == GUARDED
    # under a line it names: not a second `def hit_rate` nested in the first
    assert fixed("Replace line 7:\n" + whole) == GUARDED


def test_the_prompt_shows_the_window_tagged_and_its_answer_is_read_as_tagged() -> None:
    cfg = SweEditSettings(edit_format="tagged")
    prompt = edit_prompt(cfg, SOURCES, "hit_rate raises ZeroDivisionError on a new Stats", "", windows=[WINDOW])
    assert prompt.tagged and prompt.window == WINDOW
    assert "```\n6| def hit_rate(self):\n7|     return self.hits / (self.hits + self.misses)\n```" in prompt.user
    assert "Replace lines A-B:" in prompt.user
    read = read_answer("Replace line 7:\n" + FIX, "stop", prompt, SOURCES)
    assert read.status == "ok" and read.files["pkg/stats.py"] == GUARDED
    # the same answer to a rewrite prompt is a quote of some lines, not the function given back
    rewrite = edit_prompt(SweEditSettings(edit_format="rewrite"), SOURCES, "hit_rate fails", "", windows=[WINDOW])
    assert not rewrite.tagged and read_answer("Replace line 7:\n" + FIX, "stop", rewrite, SOURCES).status == "noop"


def test_tags_are_right_aligned_line_numbers() -> None:
    assert tagged_lines("x = 1\n\nif x:\n    y = 2", 8).split("\n") == [" 8| x = 1", " 9|", "10| if x:", "11|     y = 2"]


def test_a_noop_escalates_from_tagged_to_rewrite_and_the_retry_says_how_to_answer() -> None:
    way = Approach(SweEditSettings(edit_format="tagged"), [WINDOW])
    assert way.change("format", "", FocusSchedule(), [WINDOW], 0)
    assert way.cfg.edit_format == "rewrite"
    tagged_retry = Approach(SweEditSettings(edit_format="tagged"), [WINDOW])
    hint = tagged_retry.hint(read_tagged("No change needed.", SOURCES, WINDOW), None)
    assert "names no line" in hint and "`Replace lines A-B:`" in hint


def test_trajectories_refuse_the_tagged_form() -> None:
    with pytest.raises(ValidationError, match="no tagged edit form"):
        TrajectorySettings(edit_format="tagged")


# ------------------------------------------------------------------------- windows of the repository's own code

PACKAGE = Path(__file__).resolve().parents[2] / "agentflow"


def _one_line_statements(source: str, window: Window) -> list[int]:
    """Lines of the window that hold exactly one simple statement (replacing it by another keeps the file valid)."""
    tree = ast.parse(source)
    starts: dict[int, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            starts[node.lineno] = starts.get(node.lineno, 0) + 1
    return sorted(node.lineno for node in ast.walk(tree)
                  if isinstance(node, (ast.Assign, ast.AugAssign, ast.Return, ast.Expr, ast.Pass, ast.Raise))
                  and node.lineno == node.end_lineno and starts[node.lineno] == 1
                  and window.start < node.lineno <= window.end
                  and source.split("\n")[node.lineno - 1].strip() == ast.get_source_segment(source, node))


def _windows(count: int, seed: int) -> list[tuple[str, Window]]:
    """`count` functions of agentflow's own modules, drawn with `seed`: (their file's text, their window)."""
    rng = random.Random(seed)
    files = sorted(PACKAGE.rglob("*.py"))
    drawn: list[tuple[str, Window]] = []
    while len(drawn) < count:
        path = rng.choice(files)
        text = path.read_text(encoding="utf-8")
        functions = [s for s in symbols(str(path), text) if 3 <= s.end - s.start <= 40]
        if functions:
            sym = rng.choice(functions)
            drawn.append((text, Window(str(path.relative_to(PACKAGE)), sym.start, sym.end, 1.0, sym.qualname)))
    return drawn


def _display(text: str, window: Window) -> dict[int, str]:
    """The window's lines as the prompt shows them (at column 0), by line number."""
    lines = textwrap.dedent("\n".join(text.split("\n")[window.start - 1 : window.end])).split("\n")
    return {window.start + n: line for n, line in enumerate(lines)}


WINDOWS = _windows(60, seed=7)


@pytest.mark.parametrize("number", range(len(WINDOWS)))
def test_the_reader_on_windows_of_real_code(number: int) -> None:
    text, window = WINDOWS[number]
    sources, shown = {window.path: text}, _display(text, window)
    rng = random.Random(number)
    lines = text.split("\n")
    # (a) lines named with their text unchanged, as shown or with their tags copied
    first = rng.randint(window.start, window.end)
    last = rng.randint(first, min(window.end, first + 4))
    old = "\n".join(shown[n] for n in range(first, last + 1))
    tags = "\n".join(f"{n}| {shown[n]}" for n in range(first, last + 1))
    for block in (old, tags):
        read = read_tagged(f"Replace lines {first}-{last}:\n```python\n{block}\n```", sources, window)
        assert read.status == "noop" and read.declined, (window, read.errors)
    # (b) a line replaced by another statement, its indentation given as shown, at column 0 or as in the file
    candidates = _one_line_statements(text, window)
    if candidates:
        line = rng.choice(candidates)
        new = f"changed_{number} = {line}"
        indent = lines[line - 1][: len(lines[line - 1]) - len(lines[line - 1].lstrip())]
        expected = "\n".join([*lines[: line - 1], indent + new, *lines[line:]])
        shown_indent = shown[line][: len(shown[line]) - len(shown[line].lstrip())]
        for given in (shown_indent + new, new, indent + new):
            read = read_tagged(f"Replace line {line}:\n```python\n{given}\n```", sources, window)
            assert read.status == "ok" and read.files == {window.path: expected}, (window, line, read.errors)
        # (c) its tag copied into the code, with and without the header
        for header in (f"Replace line {line}:\n", ""):
            read = read_tagged(f"{header}```python\n{line}| {shown_indent}{new}\n```", sources, window)
            assert read.status == "ok" and read.files == {window.path: expected}, (window, line, read.errors)
    # (d) a line outside the window
    outside = rng.choice([n for n in (window.start - 1 - rng.randint(0, 5), window.end + 1 + rng.randint(0, 5)) if n >= 1])
    read = read_tagged(f"Replace line {outside}:\n```python\npass\n```", sources, window)
    assert read.status == "apply_error" and read.errors == [
        f"line {outside} is not in the code shown (lines {window.start}-{window.end})"]


def test_the_drawn_windows_exercise_replacements() -> None:
    """Most drawn windows have a one-line statement to replace (else (b) and (c) would test little)."""
    assert sum(bool(_one_line_statements(text, window)) for text, window in WINDOWS) >= len(WINDOWS) * 3 // 4
