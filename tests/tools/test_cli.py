"""`agentflow tools list|call`: output and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentflow.cli.main import run
from agentflow.tools import available_packs


def test_list_all_builtin_tools(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["tools", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split()[1] for line in lines}
    assert rows["calculate"] == "calc" and rows["json_query"] == "jsonq"
    assert {pack for pack in rows.values()} == set(available_packs())


def test_list_json_prints_schemas(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["tools", "list", "--pack", "calc", "--pack", "clock", "--json"]) == 0
    tools = json.loads(capsys.readouterr().out)
    assert [t["name"] for t in tools] == ["calculate", "current_time", "date_diff", "add_days"]
    assert tools[0]["pack"] == "calc" and tools[0]["parameters"]["required"] == ["expression"]


def test_list_user_module_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cli_user_tools.py"
    path.write_text(
        textwrap.dedent('''
        from agentflow.tools import tool

        @tool
        def shout(text: str) -> str:
            """Upper-case a text."""
            return text.upper()
    ''')
    )
    assert run(["tools", "list", "--tools", str(path)]) == 0
    out = capsys.readouterr().out
    assert "shout" in out and "Upper-case a text." in out and "calculate" not in out


def test_unknown_pack_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["tools", "list", "--pack", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown tool pack 'nope'" in err[0] and "calc" in err[0]


def test_call_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["tools", "call", "calculate", "--pack", "calc", "--input", '{"expression": "6 * 7"}']) == 0
    assert capsys.readouterr().out.strip() == "42"
    assert run(["tools", "call", "calculate", "-p", "calc", "-i", '{"expression": "1/0"}', "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["ok"] is False
    assert run(["tools", "call", "nope", "-p", "calc"]) == 2
    assert run(["tools", "call", "calculate", "-p", "calc", "-i", "{not json"]) == 2


def test_subprocess_has_no_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agentflow.cli.main", "tools", "list", "--pack", "nope"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("agentflow: error: unknown tool pack")


def test_call_with_a_local_sandbox(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cli_sandbox_tools.py"
    path.write_text(
        textwrap.dedent('''
        from agentflow.tools import ToolContext, tool

        @tool
        async def where(ctx: ToolContext) -> str:
            """Run a command in the sandbox."""
            res = await ctx.require_sandbox().exec("echo $((6 * 7))")
            return res.stdout.strip()
        ''')
    )
    assert run(["tools", "call", "where", "--tools", str(path), "--sandbox", "local"]) == 0
    assert capsys.readouterr().out.strip() == "42"
    assert run(["tools", "call", "where", "--tools", str(path)]) == 1
    assert "needs a sandbox" in capsys.readouterr().out
    assert run(["tools", "call", "where", "--tools", str(path), "--sandbox", "nope"]) == 2
