"""The trust boundary of `agentflow mcp serve`, driven by the `mcp` SDK's client over loopback HTTP: a client
holding the token cannot choose the model of `repair` / `run_workflow` (so the server's API key never goes to
a URL the client names), and `run_workflow` touches no host folder but the served one.

The servers here use `--sandbox local` (no Docker needed): what is checked happens on the host, before any
sandbox. The "attacker" is a real OpenAI-style HTTP server on 127.0.0.1 that records every request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.mcp.conftest import HERE, REPO, final_step, start_http, text, write_cassette
from tests.models.conftest import FakeServer, fake_server_process

SECRET_KEY = "sk-mcp-boundary-never-leaves"
SERVER_ENV = {"OPENAI_API_KEY": SECRET_KEY, "AGENTFLOW_API_KEY": SECRET_KEY}


@pytest.fixture
def recorder() -> Iterator[FakeServer]:
    """A loopback OpenAI-compatible server recording each request (path, body, Authorization header)."""
    with fake_server_process() as server:
        yield server


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The served folder, a private folder beside it, and a symlink from the first into the second."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    private = tmp_path / "private"
    private.mkdir()
    (private / "secret.py").write_text("def token():\n    return 'TOPSECRET-42'\n")
    (root / "link").symlink_to(private, target_is_directory=True)
    return root


def ask_workflow(path: Path) -> Path:
    """A workflow with one agent node (no tools, no sandbox): one model call; `path` is carried in the state."""
    spec = {
        "name": "ask",
        "state": {"task": {"type": "str"}, "path": {"type": "any"}, "notes": {"type": "any"},
                  "answer": {"type": "any"}},
        "nodes": {"helper": {"agent": str(HERE / "helper_agent.yaml"), "args": {"input": "task"},
                             "output": "answer", "next": "END"}},
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@asynccontextmanager
async def served(workspace: Path, tmp_path: Path, *options: str) -> AsyncIterator[Any]:
    """`agentflow mcp serve WORKSPACE --http --sandbox local OPTIONS` with an OpenAI key in its environment,
    and an SDK client holding its token."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from agentflow.serving.ports import pick_free_port

    port = pick_free_port()
    token_file = tmp_path / "token"
    proc = start_http(workspace, tmp_path / "runs", token_file, port, "--sandbox", "local", *options, env=SERVER_ENV)
    try:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token_file.read_text().strip()}"})
        async with http, Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client:
            yield client
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def job_dirs(runs: Path) -> list[Path]:
    return sorted([*runs.glob("mcp-repair-*"), *runs.glob("mcp-run-*")])


async def test_a_client_cannot_point_the_model_at_its_own_url(
    workspace: Path, tmp_path: Path, recorder: FakeServer
) -> None:
    flow = ask_workflow(tmp_path / "ask.yaml")
    own = f"replay:{write_cassette(tmp_path / 'own.json', [final_step('from the server model')])}"
    attack = recorder.spec("gpt-4o")  # openai-compatible:http://127.0.0.1:PORT/v1#gpt-4o
    async with served(workspace, tmp_path, "--workflow", str(flow), "--model", own) as client:
        run = await client.call_tool("run_workflow", {"workflow": str(flow), "input": {"task": "hi"}, "model": attack})
        repair = await client.call_tool("repair", {"issue": "add() subtracts", "model": attack})
        endpoint = await client.call_tool(
            "repair", {"issue": "add() subtracts", "options": {"base_url": recorder.openai_url}}
        )
        options = await client.call_tool(
            "repair", {"issue": "add() subtracts", "options": {"model_options.base_url": recorder.openai_url}}
        )
        role = await client.call_tool("repair", {"issue": "add() subtracts", "options": {"critic_model": attack}})
        # the control: naming the server's own model is fine
        ok = await client.call_tool("run_workflow", {"workflow": str(flow), "input": {"task": "hi"}, "model": own})

    requests = recorder.requests()
    assert requests == [], f"the client's URL got {len(requests)} requests: {requests[:1]}"
    assert SECRET_KEY not in json.dumps(requests)
    for refused in (run, repair):
        assert refused.is_error and "is not allowed" in text(refused) and "--allow-model" in text(refused)
    for refused in (endpoint, options, role):
        assert refused.is_error and "the model is the server's choice" in text(refused), text(refused)
    assert "Traceback" not in text(repair) + text(run)
    assert not ok.is_error, text(ok)
    assert json.loads(text(ok))["state"]["answer"]["text"] == "from the server model"
    assert len(job_dirs(tmp_path / "runs")) == 1  # only the allowed run ran


async def test_a_model_the_server_allows_may_be_named(workspace: Path, tmp_path: Path) -> None:
    flow = ask_workflow(tmp_path / "ask.yaml")
    extra = f"replay:{write_cassette(tmp_path / 'extra.json', [final_step('from the extra model')])}"
    own = f"replay:{write_cassette(tmp_path / 'own.json', [final_step('from the server model')])}"
    async with served(workspace, tmp_path, "--workflow", str(flow), "--model", own, "--allow-model", extra) as client:
        named = await client.call_tool("run_workflow", {"workflow": str(flow), "input": {"task": "hi"}, "model": extra})
        other = await client.call_tool("run_workflow", {"workflow": str(flow), "input": {"task": "hi"},
                                                        "model": "replay:/etc/passwd"})
    assert json.loads(text(named))["state"]["answer"]["text"] == "from the extra model"
    assert other.is_error and "is not allowed" in text(other) and extra in text(other)


async def test_run_workflow_touches_no_folder_but_the_served_one(
    workspace: Path, tmp_path: Path, recorder: FakeServer
) -> None:
    flow = ask_workflow(tmp_path / "ask.yaml")
    private = tmp_path / "private"
    (workspace / "tasks.jsonl").write_text(json.dumps(
        {"instance_id": "x-1", "repo": str(private), "base_commit": "HEAD", "FAIL_TO_PASS": []}) + "\n")
    outside = [
        ("ask", {"task": "hi", "path": "../private"}, "path"),
        ("ask", {"task": "hi", "path": "link"}, "path"),  # a symlink inside the served folder, to the private one
        ("ask", {"task": "hi", "path": str(private / "secret.py")}, "path"),
        ("ask", {"task": "hi", "notes": ["see", "/etc/passwd"]}, "notes"),  # a path-like value under any key
        ("ask", {"task": "hi", "path": "~"}, "path"),
        ("repair", {"repo": str(private), "issue": "token() is wrong"}, "repo"),
        ("repair", {"repo": "/etc", "issue": "x"}, "repo"),
        ("repair", {"repo": "link", "issue": "token() is wrong"}, "repo"),
        ("repair", {"tasks": "tasks.jsonl", "instance_id": "x-1"}, "tasks"),
    ]
    async with served(workspace, tmp_path, "--workflow", str(flow), "--model", recorder.spec()) as client:
        answers = []
        for workflow, given, key in outside:
            name = str(flow) if workflow == "ask" else workflow
            answers.append((given, key, await client.call_tool("run_workflow", {"workflow": name, "input": given})))
        inside = await client.call_tool("run_workflow", {"workflow": str(flow), "input": {"task": "hi", "path": "calc.py"}})

    leaked = [r for r in recorder.requests() if "TOPSECRET" in json.dumps(r)]
    assert not leaked, f"the private folder's code reached the model: {leaked[0]}"
    for given, key, answer in answers:
        assert answer.is_error, f"{given} was run: {text(answer)[:300]}"
        refusal = "a tasks file names repositories anywhere" if key == "tasks" else "outside the served folder"
        assert f"input '{key}'" in text(answer) and refusal in text(answer), text(answer)
    # the control: a path inside the served folder runs, and reaches the workflow resolved
    assert not inside.is_error, text(inside)
    assert json.loads(text(inside))["state"]["path"] == str((workspace / "calc.py").resolve())
    assert len(job_dirs(tmp_path / "runs")) == 1  # nothing else ran


def test_serve_refuses_a_bad_allowed_model_spec(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agentflow.cli.main", "mcp", "serve", str(tmp_path), "--allow-model", "nosuch:model"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120,
        check=False,
    )
    assert result.returncode == 2 and "nosuch:model" in result.stderr and "Traceback" not in result.stderr
