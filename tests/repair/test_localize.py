"""Localization ranks the function the failing test's traceback points into first."""

from __future__ import annotations

from agentflow.repair.localize import rank_windows, render_window, repo_map

SOURCES = {
    "pkg/a.py": "def parse(text):\n    parts = text.split('=')\n    return parts[1]\n\n\ndef unrelated():\n    return 0\n",
    "pkg/b.py": "def render(value):\n    return str(value)\n",
    "tests/test_a.py": "from pkg.a import parse\n\ndef test_parse():\n    assert parse('a=b=c') == 'b=c'\n",
}
FAILURE = (
    '  File "/workspace/tests/test_a.py", line 4, in test_parse\n'
    "pkg/a.py:3: in parse\n    return parts[1]\nE   AssertionError\n"
)


def test_traceback_frame_wins_and_tests_are_never_windows():
    windows = rank_windows(SOURCES, "values are cut after the second equals sign", FAILURE)
    assert windows[0].path == "pkg/a.py" and windows[0].symbol == "parse"
    assert all(not w.path.startswith("tests/") for w in windows)
    text = render_window(SOURCES["pkg/a.py"], windows[0])
    assert "   2|     parts = text.split('=')" in text


def test_issue_identifiers_rank_without_failures():
    windows = rank_windows(SOURCES, "`render` of None returns 'None'")
    assert windows[0].symbol == "render"


def test_repo_map_lists_functions_of_code_files():
    text = repo_map(SOURCES)
    assert "pkg/a.py: parse, unrelated" in text and "tests/" not in text


def test_functions_the_failing_test_calls_rank_higher():
    sources = {"pkg/a.py": "def alpha(x):\n    return x\n\n\ndef beta(x):\n    return x\n"}
    failure = "    def test_it():\n>       assert beta(1) == 2\nE       assert 1 == 2\n"
    assert rank_windows(sources, "numbers come out wrong", failure)[0].symbol == "beta"


def test_helpers_an_issue_function_calls_or_passes_on_rank_next():
    sources = {
        "kit/config.py": ("from kit import values\n\nclass Config:\n    def getbool(self, key):\n"
                          "        return self._typed(values.to_bool, key)\n\n"
                          "    def _typed(self, convert, key):\n        return convert(self.data[key])\n"),
        "kit/values.py": ("def to_bool(raw):\n    return {'yes': True, 'no': False}[raw]\n\n"
                          "def to_int(raw):\n    return int(raw)\n\ndef get(raw):\n    return raw\n"),
        "kit/other.py": "def get(key):\n    return key\n",
    }
    windows = rank_windows(sources, "`getbool` raises KeyError for 'maybe'", limit=4)
    names = [w.symbol for w in windows]
    assert names[0] == "getbool"
    # passed along as `values.to_bool` and called as `self._typed(...)`: both follow the function named
    assert set(names[1:3]) == {"to_bool", "_typed"}
    assert "to_int" not in names and "get" not in names  # not referenced; `get` is ambiguous anyway
