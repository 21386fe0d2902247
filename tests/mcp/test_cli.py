"""`agentflow tools list|call --mcp CMD`: an MCP server's tools from the command line."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

from tests.mcp.conftest import REPO, STDIO_COMMAND


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentflow.cli.main", *args],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120, check=False,
    )


def test_tools_list_and_call_with_mcp() -> None:
    server = shlex.join(STDIO_COMMAND)
    listed = cli("tools", "list", "--mcp", server)
    assert listed.returncode == 0, listed.stderr
    rows = [line.split()[:2] for line in listed.stdout.splitlines()]
    assert ["add", "mcp:fixture_server"] in rows and len(rows) == 8  # only the server's tools
    called = cli("tools", "call", "add", "-i", '{"a": 20, "b": 22}', "--mcp", server)
    assert called.returncode == 0 and called.stdout.strip() == "42"
    bad = cli("tools", "call", "add", "-i", '{"a": 1}', "--mcp", server)
    assert bad.returncode == 1 and "'b' is required" in bad.stdout


def test_a_server_that_cannot_start_is_one_line_and_exit_2() -> None:
    result = cli("tools", "list", "--mcp", "no-such-mcp-server --stdio")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "no-such-mcp-server --stdio" in result.stderr
    assert "Traceback" not in result.stderr


def test_mcp_serve_refuses_a_missing_workspace_and_a_non_loopback_host(tmp_path) -> None:
    missing = cli("mcp", "serve", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "is not a directory" in missing.stderr and "Traceback" not in missing.stderr
    public = cli("mcp", "serve", str(tmp_path), "--http", "--host", "0.0.0.0")
    assert public.returncode == 2 and "not a loopback address" in public.stderr
