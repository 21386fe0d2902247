"""What the reproduction prompt shows of the repository's own tests: how its objects are made and called."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentflow.models.base import ChatRequest, ChatResponse
from agentflow.models.replay import ReplayModel
from agentflow.repair.config import load_repair_config
from agentflow.repair.steps import usage_from_tests, write_reproduction
from tests.repair.conftest import scripted_cassette

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


ISSUE = ("Negative numbers are left-aligned\n\n```python\nprint(render([['a', '120'], ['b', '-3']]))\n```\n\n"
         "```\na  120\nb  -3\n```\n\nExpected `-3` to be right-aligned under `120`.\n")
PRINTED = "from kit import render\n\nprint(render([['a', '120'], ['b', '-3']]))\n"


class _Asked:
    """A scripted model that keeps the prompts it was asked."""

    def __init__(self, cassette: Path) -> None:
        self.replay = ReplayModel(cassette)
        self.prompts: list[str] = []

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.prompts.append(request.messages[-1].content or "")
        return await self.replay.chat(request)


@pytest.mark.parametrize(("script", "output", "told", "reported"), [
    (PRINTED, "a  120\nb  -3\n", True, True),  # printed the issue's output, checked nothing
    (PRINTED, "a  120\nb   -3\n", True, False),  # printed something else
    ("from kit import render\nassert render([['b', '-3']]) == 'b  -3'\n", "", False, False),  # it checks
])
def test_a_retry_after_a_script_that_checks_nothing_is_told_to_assert(tmp_path: Path, script: str, output: str,
                                                                       told: bool, reported: bool):
    model = _Asked(scripted_cassette(tmp_path / "c.json", ["```python\nassert False\n```"]))
    cfg = load_repair_config()
    got = asyncio.run(write_reproduction(model, cfg, ISSUE, SOURCES, seed=0,  # type: ignore[arg-type]
                                         previous=(script, f"{output}(not counted: it ran without error)")))
    assert got == "assert False\n"
    prompt = model.prompts[0]
    assert ("asserts nothing" in prompt) is told
    assert ("is the output the issue reports" in prompt) is reported
