"""`agentflow mcp serve` driven by the `mcp` SDK's client: lists the tools, runs `bash` in the Docker
sandbox (no network), edits a file, runs the tests, streams a workflow's progress, and over HTTP refuses a
request without the bearer token."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx
import pytest

from tests.mcp.conftest import REPO, serve_args, start_http, text

pytestmark = pytest.mark.docker


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    return root


@pytest.fixture(autouse=True)
def _docker(sandbox_image: str) -> None:
    del sandbox_image


async def test_stdio_serve_runs_tools_in_the_sandbox(workspace: Path, tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=serve_args(workspace, tmp_path / "runs"),
        env={"PYTHONPATH": str(REPO), **({"DOCKER_HOST": os.environ["DOCKER_HOST"]} if "DOCKER_HOST" in os.environ else {})},
        cwd=str(REPO),
    )
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"bash", "view", "str_replace", "search", "apply_patch", "run_tests"} <= names
        assert {"workspace_diff", "repair", "run_workflow"} <= names

        listing = await client.call_tool("bash", {"command": "ls; id -u; cat calc.py"})
        assert not listing.is_error and "test_calc.py" in text(listing) and "return a - b" in text(listing)
        assert "\n1000\n" in text(listing)  # not root inside the container

        offline = await client.call_tool(
            "bash",
            {"command": "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)\""},
        )
        assert offline.is_error and "exit code 1" in text(offline)  # no network inside

        failing = await client.call_tool("run_tests", {})
        assert failing.is_error and "test_add" in text(failing)

        edit = await client.call_tool(
            "str_replace", {"path": "calc.py", "old_str": "return a - b", "new_str": "return a + b"}
        )
        assert not edit.is_error, text(edit)
        passing = await client.call_tool("run_tests", {})
        assert not passing.is_error, text(passing)

        diff = await client.call_tool("workspace_diff", {})
        assert "-    return a - b" in text(diff) and "+    return a + b" in text(diff)
        assert "return a - b" in (workspace / "calc.py").read_text()  # the host copy is untouched

        bad = await client.call_tool("bash", {})
        assert bad.is_error and "'command' is required" in text(bad)

        steps: list[str] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            steps.append(message or "")

        run = await client.call_tool(
            "run_workflow", {"workflow": "demo", "input": {"topic": "mcp", "rounds": 2}}, progress_callback=on_progress
        )
        assert not run.is_error, text(run)
        assert '"status": "done"' in text(run) and "mcp" in text(run)
        assert any(s.startswith("run.start") for s in steps) and any(s.startswith("run.end") for s in steps)

        refused = await client.call_tool("run_workflow", {"workflow": "/etc/passwd"})
        assert refused.is_error and "is not served" in text(refused)

        # the model is the server's choice: a client naming another one is refused before anything runs
        repair = await client.call_tool("repair", {"issue": "add() subtracts", "model": "nosuch:model"})
        assert repair.is_error and "'nosuch:model' is not allowed" in text(repair) and "Traceback" not in text(repair)


async def test_http_serve_needs_the_bearer_token(workspace: Path, tmp_path: Path) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from agentflow.serving.ports import pick_free_port

    port = pick_free_port()
    token_file = tmp_path / "secret" / "token"
    proc = start_http(workspace, tmp_path / "runs", token_file, port)
    try:
        assert token_file.stat().st_mode & 0o777 == 0o600
        token = token_file.read_text().strip()
        url = f"http://127.0.0.1:{port}/mcp"
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        assert httpx.post(url, json=body, timeout=10).status_code == 401
        wrong = httpx.post(url, json=body, headers={"Authorization": "Bearer nope"}, timeout=10)
        assert wrong.status_code == 401

        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            assert "bash" in {t.name for t in (await client.list_tools()).tools}
            echoed = await client.call_tool("bash", {"command": "echo from-the-sandbox"})
            assert text(echoed).startswith("from-the-sandbox")
    finally:
        proc.terminate()
        proc.wait(timeout=60)


async def test_repair_returns_a_verified_patch_with_progress(tmp_path: Path) -> None:
    import shutil

    from mcp import Client, StdioServerParameters

    repo = tmp_path / "inikit"
    shutil.copytree(REPO / "examples" / "swe-tasks" / "repos" / "inikit", repo)
    cassette = REPO / "tests" / "repair" / "cassettes" / "bench" / "inikit__inikit-1.json"
    check = "python3 -c \"from inikit import loads; assert loads('[a]\\nk = x=y\\n').get('a', 'k') == 'x=y'\""
    params = StdioServerParameters(  # the model is the server's choice
        command=sys.executable, args=serve_args(repo, tmp_path / "runs", "--model", f"replay:{cassette}"),
        env={"PYTHONPATH": str(REPO)}, cwd=str(REPO),
    )
    steps: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append(message or "")

    async with Client(params) as client:
        bad = await client.call_tool("repair", {"issue": "x", "options": {"sandbox": "local"}})
        assert bad.is_error and "invalid arguments for tool 'repair'" in text(bad)  # where code runs is not an option
        fixed = await client.call_tool(
            "repair",
            {
                "issue": "Values containing `=` are cut off after the second `=` by `loads`.",
                "test_cmd": check,
                "options": {"edit.format": "search_replace"},
            },
            progress_callback=on_progress,
        )
    assert not fixed.is_error, text(fixed)
    assert 'split("=", 1)' in text(fixed) and '"status": "submitted"' in text(fixed)
    assert 'split("=", 1)' not in (repo / "inikit" / "parser.py").read_text()  # the served folder is untouched
    assert any(s.startswith("repair.start") for s in steps), steps
