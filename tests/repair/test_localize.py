"""Localization ranks the function the failing test's traceback points into first."""

from __future__ import annotations

from agentflow.repair.locate.localize import (
    bound_method_calls,
    failure_calls,
    function_window,
    functions_touched,
    operator_methods,
    quoted_messages,
    rank_windows,
    render_window,
    repo_map,
    symbols,
)

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
    assert names[0] == "Config.getbool"
    # passed along as `values.to_bool` and called as `self._typed(...)`: both follow the function named
    assert set(names[1:3]) == {"to_bool", "Config._typed"}
    assert "to_int" not in names and "get" not in names  # not referenced; `get` is ambiguous anyway


def test_methods_have_qualified_names_and_a_patch_names_the_functions_it_changes():
    source = ("class Cache:\n    def get(self, key):\n        return self.data[key]\n\n"
              "    def put(self, key, value):\n        def check(v):\n            return v\n"
              "        self.data[key] = check(value)\n\n\ndef helper():\n    return 1\n")
    assert [s.qualname for s in symbols("m.py", source)] == ["Cache.get", "Cache.put", "Cache.put.check", "helper"]
    patch = ("--- a/m.py\n+++ b/m.py\n@@ -2,3 +2,3 @@ class Cache:\n     def get(self, key):\n"
             "-        return self.data[key]\n+        return self.data.get(key)\n \n"
             "@@ -11,2 +11,3 @@\n def helper():\n     return 1\n+# trailing\n")
    assert functions_touched(patch, {"m.py": source}) == ["m.py:Cache.get", "m.py:helper"]


def test_a_long_function_is_shown_as_whole_statements_around_the_fault():
    body = "\n".join(f"    x{i} = {i}" for i in range(30))
    loop = "    for item in items:\n        if item:\n            total += item\n        else:\n            total -= 1\n"
    source = f'def long(items):\n    """Doc."""\n    total = 0\n{body}\n{loop}{body}\n    return total\n'
    lines = source.split("\n")
    fault = lines.index("            total += item") + 1
    sym = symbols("m.py", source)[0]
    start, end = function_window(sym, 12, fault)
    assert end - start + 1 <= 12 and start <= fault <= end
    shown = lines[start - 1 : end]
    # whole statements: the window starts at a statement of the body and does not cut the loop in two
    assert shown[0].startswith("    ") and not shown[0].startswith("     ")
    assert ("    for item in items:" in shown) == ("            total -= 1" in shown)
    # without a fault line, the window starts past the docstring
    start, _ = function_window(sym, 12, None)
    assert lines[start - 1].strip() == "total = 0"


def test_a_function_whose_body_fits_is_shown_whole_with_its_def_line_and_docstring():
    # tabkit's `render`: 32 lines, 30 of them body; cut to 30 lines it lost its `def` line and docstring, and the
    # model wrapped the body it was shown in a `def` of its own
    body = "\n".join(f"    x{i} = {i}" for i in range(29))
    source = f'def render(rows):\n    """Doc."""\n{body}\n    return rows\n'
    assert function_window(symbols("m.py", source)[0], 30, None) == (1, 32)
    longer = source.replace("    return rows", "    x29 = 29\n    return rows")  # 31 lines of body: cut
    start, end = function_window(symbols("m.py", longer)[0], 30, None)
    assert (start, end) == (3, 32)


def test_a_quoted_error_message_leads_to_the_code_that_raises_it():
    sources = {"pkg/cache.py": ("class Cache:\n    def __setitem__(self, key, value):\n"
                                "        if self.size(value) >= self.maxsize:\n"
                                "            raise ValueError('value too large')\n        self.data[key] = value\n\n"
                                "    def maxsize_of(self):\n        # value too large is checked in setitem\n"
                                "        return self.maxsize\n")}
    issue = "Storing an item fails:\n\n```\n>>> c['a'] = 'xyz'\nValueError: value too large\n```\n"
    assert quoted_messages(issue) == ["value too large"]
    assert rank_windows(sources, issue, limit=1)[0].symbol == "Cache.__setitem__"  # not the comment's function


def test_operators_in_the_issue_lead_to_the_special_methods_of_the_class_it_names():
    sources = {"pkg/ttl.py": ("class TTLCache:\n    def __contains__(self, key):\n        return key in self.data\n\n"
                              "    def expire(self, now):\n        return now\n\n"
                              "class Other:\n    def __contains__(self, key):\n        return False\n")}
    issue = "TTLCache: membership is wrong after expiry\n\n```python\n>>> c = TTLCache()\n>>> 1 in c\nTrue\n```\n"
    assert operator_methods(issue) >= {"__contains__"}
    assert rank_windows(sources, issue, limit=1)[0].symbol == "TTLCache.__contains__"


def test_methods_called_on_an_instance_the_issue_makes_lead_to_that_class():
    # cachette-1: the issue reads through `cache.get` of an LRUCache and names `TTLCache` and `memoize` as
    # behaving alike; the method it calls on its own instance is the suspect, not another class's `get`
    sources = {"pkg/lru.py": "class LRUCache:\n    def get(self, key):\n        return self.data[key]\n\n"
                             "    def size(self):\n        return len(self.data)\n",
               "pkg/ttl.py": "class TTLCache:\n    def get(self, key, default=None):\n        # entries just read: evicts none\n"
                             "        return self.data.get(key, default)\n"}
    issue = ("LRUCache evicts entries that were just read\n\n```python\ncache = LRUCache(2)\ncache.set('a', 1)\n"
             "cache.get('a')\n>>> other = pkg.TTLCache(3)\n>>> 'a' in other\n```\n`TTLCache` behaves the same.\n")
    assert bound_method_calls(issue) == {("LRUCache", "set"), ("LRUCache", "get"), ("TTLCache", "__contains__")}
    assert rank_windows(sources, issue, limit=1)[0].symbol == "LRUCache.get"
    assert bound_method_calls("no code here: cache.get(1)") == set()


def test_a_focus_on_a_long_blocks_header_shows_whole_statements_of_its_block():
    body = "\n".join(f"        x{i} = {i}" for i in range(60))
    source = f"def f(items):\n    total = 0\n    for item in items:\n{body}\n    return total\n"
    start, end = function_window(symbols("m.py", source)[0], 20, 3)  # line 3: the `for` header
    assert (start, end) == (4, 23)  # the loop's first 20 statements, none cut


def test_calls_in_a_reproduction_script_s_frames_do_not_count_as_failing_calls():
    output = ('Traceback (most recent call last):\n'
              '  File "/workspace/.agentflow_eval/reproduce_issue.py", line 3, in <module>\n'
              '    assert not Specifier("~1.2.3").contains("1.3.1")\n'
              '  File "/workspace/verspec/specifier.py", line 40, in contains\n'
              '    return all(_OPS[op](version, bound) for op, bound in self.clauses)\n'
              'AssertionError\n'
              '>       assert parse("1.2") == expected\n')
    files = {"verspec/specifier.py", "verspec/version.py"}
    # the script's line restates the issue; the repository's own frame and a test's line (pytest) still count
    assert failure_calls(output, files) == {"all", "parse"}
