"""`agentflow models check`, and the promise that `import agentflow` stays light."""

from __future__ import annotations

import json
import subprocess
import sys

from agentflow.cli.main import run

from .conftest import CASSETTES


def test_check_against_a_real_server(server, capsys) -> None:
    assert run(["models", "check", server.spec("tiny"), "--prompt", "ping"]) == 0
    out = capsys.readouterr().out
    assert "reply: echo: ping" in out and "tokens:" in out and "latency:" in out
    assert server.requests()[0]["body"]["max_tokens"] == 16


def test_check_json(server, capsys) -> None:
    assert run(["models", "check", server.spec("tiny"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and data["reply"].startswith("echo:") and data["output_tokens"] > 0


def test_check_replay_cassette(capsys, tmp_path) -> None:
    path = tmp_path / "c.json"
    path.write_text((CASSETTES / "scripted_tool_use.json").read_text())
    assert run(["models", "check", f"replay:{path}", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["input_tokens"] == 40


def test_check_bad_spec_exits_2_with_one_line(capsys) -> None:
    assert run(["models", "check", "nonsense"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "accepted forms" in err[0]


def test_check_unreachable_exits_1(capsys) -> None:
    assert run(["models", "check", "openai-compatible:http://127.0.0.1:1/v1#m", "--attempts", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "connection failed" in err[0]


def test_import_agentflow_does_not_load_sdks() -> None:
    code = (
        "import sys, agentflow, agentflow.models, agentflow.models.spec, agentflow.models.base\n"
        "heavy = [m for m in ('openai', 'anthropic', 'langgraph', 'litellm', 'docker', 'networkx') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == ""
