"""The sandbox-backed tool packs, run as a model would call them (through Tool.run)."""

from __future__ import annotations

import pytest

from agentflow.tools import load_pack
from agentflow.tools.context import ToolContext

pytestmark = [pytest.mark.docker, pytest.mark.asyncio(loop_scope="session")]


def _tools(*packs: str) -> dict:
    out = {}
    for name in packs:
        for t in load_pack(name):
            out[t.name] = t
    return out


async def test_shell_tool(sb):
    t = _tools("shell")["bash"]
    assert "ctx" not in t.spec.parameters.get("properties", {})
    ctx = ToolContext(sandbox=sb)
    r = await t.run({"command": "echo hi; exit 2"}, ctx)
    assert not r.ok and "hi" in r.text and "exit code 2" in r.text and r.data["exit_code"] == 2
    r = await t.run({"command": "sleep 5", "timeout": 0.5}, ctx)
    assert "timed out" in r.text and r.data["timed_out"]


async def test_editor_tools(sb):
    tools = _tools("editor")
    ctx = ToolContext(sandbox=sb)
    r = await tools["create"].run({"path": "e/m.py", "content": "a = 1\nb = 2\nc = 3\n"}, ctx)
    assert r.ok, r.text
    r = await tools["view"].run({"path": "e/m.py", "start_line": 2, "end_line": 3}, ctx)
    assert r.text == "     2\tb = 2\n     3\tc = 3"
    r = await tools["str_replace"].run({"path": "e/m.py", "old_str": "b = 2", "new_str": "b = 20"}, ctx)
    assert r.ok and "b = 20" in r.text
    r = await tools["str_replace"].run({"path": "e/m.py", "old_str": "zzz", "new_str": "y"}, ctx)
    assert not r.ok and "not found" in r.text
    r = await tools["insert"].run({"path": "e/m.py", "line": 0, "text": "import os"}, ctx)
    assert r.ok
    assert await sb.read_file("e/m.py") == "import os\na = 1\nb = 20\nc = 3\n"
    await tools["undo_edit"].run({"path": "e/m.py"}, ctx)
    await tools["undo_edit"].run({"path": "e/m.py"}, ctx)
    assert await sb.read_file("e/m.py") == "a = 1\nb = 2\nc = 3\n"
    r = await tools["view"].run({"path": "e"}, ctx)
    assert r.text == "m.py"
    r = await tools["view"].run({"path": "e/m.py", "start_line": 50}, ctx)
    assert not r.ok and "has 3 lines" in r.text


async def test_search_and_patch_tools(sb):
    tools = _tools("search", "patch")
    ctx = ToolContext(sandbox=sb)
    await sb.write_file("s/a.py", "def alpha():\n    return 1\n")
    await sb.write_file("s/b.txt", "alpha in text\n")
    r = await tools["search"].run({"pattern": "def al", "path": "s"}, ctx)
    assert r.data["total"] == 1 and r.data["matches"][0] == {
        "path": "s/a.py",
        "line": 1,
        "text": "def alpha():",
    }
    r = await tools["search"].run({"pattern": "alpha", "path": "s", "glob": "*.txt"}, ctx)
    assert [m["path"] for m in r.data["matches"]] == ["s/b.txt"]
    diff = "--- a/s/a.py\n+++ b/s/a.py\n@@ -1,2 +1,2 @@\n def alpha():\n-    return 1\n+    return 2\n"
    r = await tools["apply_patch"].run({"diff": diff}, ctx)
    assert r.ok, r.text
    assert "return 2" in await sb.read_file("s/a.py")
    r = await tools["apply_patch"].run({"diff": diff}, ctx)
    assert not r.ok and "does not apply" in r.text


async def test_run_tests_tool(sb):
    t = _tools("tests")["run_tests"]
    ctx = ToolContext(sandbox=sb)
    await sb.write_file(
        "proj/test_m.py",
        "import pytest\n\ndef test_ok():\n    assert 1\n\ndef test_bad():\n    assert 1 == 2\n\n"
        "@pytest.mark.parametrize('x', [1, 2])\ndef test_p(x):\n    assert x == 1\n",
    )
    r = await t.run({"path": "proj"}, ctx)
    assert not r.ok
    assert r.data["passed"] == ["test_m.py::test_ok", "test_m.py::test_p[1]"]
    assert r.data["failed"] == ["test_m.py::test_bad", "test_m.py::test_p[2]"]
    assert "2 passed, 2 failed" in r.text and "assert 1 == 2" in r.text
    r = await t.run({"path": "proj", "test_ids": ["test_m.py::test_ok"]}, ctx)
    assert r.ok and r.data["passed"] == ["test_m.py::test_ok"] and r.data["failed"] == []


async def test_tool_without_sandbox_fails_clearly():
    t = _tools("shell")["bash"]
    r = await t.run({"command": "ls"}, ToolContext())
    assert not r.ok and "needs a sandbox" in r.text
