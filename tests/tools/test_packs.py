"""Tool packs: built-in ones by name, user modules by dotted name or file path."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from agentflow.errors import UserError
from agentflow.models.base import ToolCall
from agentflow.resources import data_dir
from agentflow.tools import Tool, ToolRegistry, available_packs, load_pack

USER_MODULE = '''
from pydantic import BaseModel
from agentflow.tools import tool


class Greeting(BaseModel):
    text: str


@tool
def greet(name: str, shout: bool = False) -> Greeting:
    """Greet someone.

    Args:
        name: Who to greet.
        shout: Use capitals.
    """
    text = f"hello {name}"
    return Greeting(text=text.upper() if shout else text)


alias = greet  # the same tool bound twice is collected once


def helper() -> None:
    """Not a tool."""
'''


@pytest.fixture()
def user_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    name = f"af_user_{request.node.name.replace('[', '_').replace(']', '_')}"
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tools.py").write_text(textwrap.dedent(USER_MODULE))
    (pkg / "empty.py").write_text("X = 1\n")
    (pkg / "broken.py").write_text("import a_module_that_is_not_installed_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[mod]


def test_builtin_packs_are_found_in_the_data_dir() -> None:
    packs = available_packs()
    assert {"calc", "text", "jsonq", "clock"} <= set(packs)
    assert all((data_dir("tools") / f"{p}.py").is_file() for p in packs)


def test_load_builtin_pack_by_name_under_a_private_module() -> None:
    tools = load_pack("calc")
    assert [t.name for t in tools] == ["calculate"] and tools[0].pack == "calc"
    assert tools[0].fn.__module__ == "agentflow_packs.calc"
    assert "tools" not in sys.modules or not hasattr(sys.modules["tools"], "calculate")
    assert load_pack("calc")[0] is tools[0]  # loaded once per process


def test_load_user_module_by_dotted_name(user_package: str) -> None:
    tools = load_pack(f"{user_package}.tools")
    assert [t.name for t in tools] == ["greet"] and isinstance(tools[0], Tool)
    assert tools[0].pack == f"{user_package}.tools"
    assert tools[0].spec.parameters["properties"]["name"]["description"] == "Who to greet."


async def test_from_packs_combines_builtin_and_user_tools(user_package: str) -> None:
    registry = ToolRegistry.from_packs(["calc", f"{user_package}.tools"])
    assert registry.names == ["calculate", "greet"]
    result = await registry.execute(ToolCall(id="1", name="greet", arguments={"name": "ada", "shout": True}))
    assert result.ok and result.data == {"text": "HELLO ADA"}


def test_load_pack_from_a_file_path(tmp_path: Path) -> None:
    path = tmp_path / "my_file_tools.py"
    path.write_text(textwrap.dedent(USER_MODULE))
    (tool_,) = load_pack(str(path))
    assert tool_.name == "greet"
    with pytest.raises(UserError, match="not found"):
        load_pack(str(tmp_path / "missing.py"))


def test_unknown_pack_is_one_line_listing_the_packs() -> None:
    with pytest.raises(UserError) as info:
        load_pack("no_such_pack")
    message = str(info.value)
    assert "\n" not in message and "unknown tool pack 'no_such_pack'" in message
    assert all(p in message for p in available_packs())
    with pytest.raises(UserError, match="unknown tool pack"):
        load_pack("no_such_pkg.tools")
    with pytest.raises(UserError, match="unknown tool pack"):
        load_pack("not a module!")


def test_modules_without_tools_or_that_fail_to_import(user_package: str) -> None:
    with pytest.raises(UserError, match="defines no @tool functions"):
        load_pack(f"{user_package}.empty")
    with pytest.raises(UserError, match="failed to import.*a_module_that_is_not_installed_anywhere"):
        load_pack(f"{user_package}.broken")


async def run_tool(registry: ToolRegistry, name: str, **arguments: object) -> tuple[bool, str]:
    result = await registry.execute(ToolCall(id="1", name=name, arguments=arguments))
    return result.ok, result.text


async def test_calc_pack() -> None:
    r = ToolRegistry.from_packs(["calc"])
    assert await run_tool(r, "calculate", expression="(3 + 4) * 2 ** 10") == (True, "7168")
    assert await run_tool(r, "calculate", expression="10 / 4") == (True, "2.5")
    assert await run_tool(r, "calculate", expression="factorial(5) - gcd(12, 18)") == (True, "114")
    ok, text = await run_tool(r, "calculate", expression="__import__('os')")
    assert not ok and "unknown function '__import__'" in text
    ok, text = await run_tool(r, "calculate", expression="(1).__class__")
    assert not ok and "unsupported syntax" in text
    ok, text = await run_tool(r, "calculate", expression="9 ** 9 ** 9")
    assert not ok and "exponent" in text
    assert (await run_tool(r, "calculate", expression="1 / 0")) == (False, "ToolError: division by zero")


async def test_text_pack() -> None:
    r = ToolRegistry.from_packs(["text"])
    result = await r.execute(
        ToolCall(
            id="1",
            name="regex_search",
            arguments={"pattern": r"def (\w+)", "text": "x\ndef foo():\n    def bar(): ..."},
        )
    )
    assert result.data["total"] == 2
    assert [(m["line"], m["column"], m["groups"]) for m in result.data["matches"]] == [
        (2, 1, ["foo"]),
        (3, 5, ["bar"]),
    ]
    ok, text = await run_tool(r, "regex_search", pattern="(", text="abc")
    assert not ok and "invalid regular expression" in text
    ok, text = await run_tool(r, "extract_lines", text="a\nb\nc\nd", start=2, end=3)
    assert ok and text == "2 | b\n3 | c"
    ok, text = await run_tool(r, "text_stats", text="one two\n\nthree")
    assert json.loads(text) == {"characters": 14, "words": 3, "lines": 3, "non_blank_lines": 2}


async def test_jsonq_pack() -> None:
    r = ToolRegistry.from_packs(["jsonq"])
    doc = json.dumps(
        {"items": [{"name": "a", "n": 1}, {"name": "b", "n": 2}, {"name": "a"}], "odd key": [5, 6]}
    )
    assert await run_tool(r, "json_query", document=doc, path=".items[1].name") == (True, '"b"')
    assert await run_tool(r, "json_query", document=doc, path=".items[].name") == (True, '"a"\n"b"\n"a"')
    assert await run_tool(r, "json_query", document=doc, path=".items[].name | unique") == (
        True,
        '["a", "b"]',
    )
    assert await run_tool(r, "json_query", document=doc, path='."odd key"[-1]') == (True, "6")
    assert await run_tool(r, "json_query", document=doc, path=".items | length") == (True, "3")
    ok, text = await run_tool(r, "json_query", document=doc, path=".items.name")
    assert not ok and "cannot take key 'name' of an array" in text
    ok, text = await run_tool(r, "json_query", document="{bad", path=".")
    assert not ok and "not valid JSON" in text


async def test_clock_pack() -> None:
    r = ToolRegistry.from_packs(["clock"])
    assert await run_tool(r, "date_diff", start="2024-01-01", end="2024-03-01") == (
        True,
        '{"days":60,"weeks":8}',
    )
    assert await run_tool(r, "add_days", start="2024-02-28", days=2) == (
        True,
        '{"date":"2024-03-01","weekday":"Friday"}',
    )
    ok, text = await run_tool(r, "current_time", timezone="Asia/Tokyo")
    assert ok and json.loads(text)["iso"].endswith("+09:00")
    ok, text = await run_tool(r, "current_time", timezone="Mars/Olympus")
    assert not ok and "unknown time zone" in text
