"""What the reproduction prompt shows of the repository's own tests: how its objects are made and called."""

from __future__ import annotations

from agentflow.repair.edit.steps import usage_from_tests

SOURCES = {
    "kit/__init__.py": "from kit.config import Config, loads\n",
    "kit/config.py": "class Config:\n    def __init__(self, sections):\n        self.s = sections\n",
    "tests/conftest.py": "import pytest\n\n@pytest.fixture\ndef cfg():\n    return loads('[a]\\nx = 1\\n')\n",
    "tests/test_config.py": (
        "from kit import Config, loads\n\nTEXT = '[db]\\nurl = x\\n'\nUNUSED = 3\n\n"
        "def test_get_url():\n    assert loads(TEXT).get('db', 'url') == 'x'\n\n"
        "def test_getbool(cfg):\n    assert cfg.getbool('a', 'x') is True\n\n"
        "def test_unrelated():\n    assert Config({}).sections() == []\n"
    ),
}


def test_the_tests_sharing_the_issue_s_names_come_with_their_imports_values_and_fixtures():
    usage = usage_from_tests(SOURCES, "`cfg.get('db', 'url')` cuts the url; getbool too")
    assert "from kit import Config, loads" in usage
    assert "def test_get_url" in usage and "TEXT = '[db]" in usage  # the value the test builds it from
    assert "def test_getbool(cfg)" in usage and "def cfg():" in usage  # and the fixture it takes
    assert "UNUSED" not in usage and "test_unrelated" not in usage  # shares no name with the issue


def test_nothing_is_shown_when_no_test_shares_a_name_or_none_fits():
    assert usage_from_tests(SOURCES, "the README has a typo") == ""
    assert usage_from_tests(SOURCES, "getbool", budget_chars=10) == ""
