"""`mcp_servers:` in workflow specs: shapes, checks, and that none of it imports the `mcp` SDK."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentflow.errors import UserError
from agentflow.graph import load_workflow, validate
from agentflow.mcp.config import McpServerConfig, parse_server
from tests.mcp.conftest import REPO, stdio_server_entry, write_workflow


def test_server_config_shapes() -> None:
    stdio = parse_server("npx -y @scope/server-files --root '/my dir'")
    assert stdio.argv == ["npx", "-y", "@scope/server-files", "--root", "/my dir"] and stdio.name == "server-files"
    assert parse_server("uvx mcp-server-git").name == "mcp-server-git"
    http = parse_server("http://127.0.0.1:9000/mcp")
    assert http.url == "http://127.0.0.1:9000/mcp" and http.name == "127_0_0_1_9000"
    with pytest.raises(UserError, match="exactly one of command"):
        parse_server({"command": "x", "url": "http://127.0.0.1/mcp"})
    with pytest.raises(UserError, match="must start with http"):
        parse_server({"url": "ftp://host/mcp"})
    with pytest.raises(UserError, match="bogus"):
        parse_server({"command": "x", "bogus": 1})
    assert McpServerConfig(command=["/usr/bin/python3", "-m", "srv"]).name == "srv"


def test_workflow_mcp_servers_mapping_and_unknown_server_names(tmp_path: Path) -> None:
    spec = load_workflow(write_workflow(tmp_path / "wf.yaml", stdio_server_entry()))
    (server,) = spec.mcp_servers
    assert server.name == "fixture" and server.prefix == "fx_" and server.block == ["fail"]
    assert validate(spec) == []
    spec.nodes["helper"].args["mcp_servers"] = ["fixture", "github"]
    (problem,) = validate(spec)
    assert "github" in str(problem) and "declared: fixture" in str(problem)


def test_loading_a_workflow_with_mcp_servers_imports_no_sdk(tmp_path: Path) -> None:
    path = write_workflow(tmp_path / "wf.yaml", stdio_server_entry())
    code = (
        "import sys, agentflow, agentflow.cli.main\n"
        "from agentflow.graph import load_workflow, validate\n"
        f"assert validate(load_workflow({str(path)!r})) == []\n"
        "print(sorted(m for m in ('mcp', 'mcp_types', 'jsonschema', 'uvicorn') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"
