"""MCP tools in agent runs with replayed model calls: the call reaches the server and its result reaches the
model (stdio and streamable HTTP); kill -9 of the server mid-run is a tool error and the next call works;
resume after kill -9 of the run does not repeat a completed MCP call."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agentflow.events import EventLog
from agentflow.graph import RunHandles, WorkflowRunner, load_workflow
from agentflow.models.base import ChatRequest
from agentflow.models.replay import RecordingModel, ReplayModel
from tests.mcp.conftest import (
    REPO,
    final_step,
    stdio_server_entry,
    tool_step,
    wait_for_line,
    write_cassette,
    write_workflow,
)


def tool_messages(recording: Path) -> list[str]:
    """What the model was shown as tool results, in order (from the recorded requests)."""
    data = json.loads(recording.read_text())
    last = ChatRequest.model_validate(data["interactions"][-1]["request"])
    return [m.content or "" for m in last.messages if m.role == "tool"]


def tool_events(run_dir: Path) -> list[dict]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [e["data"] for e in map(json.loads, lines) if e["kind"] == "tool.call"]


async def run_agent(tmp_path: Path, server: dict, steps: list[dict], during=None) -> tuple[dict, Path]:
    cassette = write_cassette(tmp_path / "cassette.json", steps)
    recording = tmp_path / "recorded.json"
    spec = load_workflow(write_workflow(tmp_path / "wf.yaml", server))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    events = EventLog(run_dir / "events.jsonl", run_id="r")
    ctx = RunHandles(events=events, chat_model=RecordingModel(ReplayModel(cassette), recording))
    async with WorkflowRunner(spec, run_dir=run_dir, context=ctx) as runner:
        task = asyncio.create_task(runner.start({"task": "use the tools"}, thread_id="t"))
        if during is not None:
            await during()
        result = await task
    events.close()
    assert result.status == "done"
    return result.state, recording


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_agent_calls_an_mcp_tool_and_reads_its_result(tmp_path: Path, transport: str, request) -> None:
    server = stdio_server_entry() if transport == "stdio" else {"url": request.getfixturevalue("http_fixture").url}
    steps = [tool_step("fx_add", {"a": 19, "b": 23}, "c1"), final_step("the sum is 42")]
    state, recording = await run_agent(tmp_path, server, steps)
    assert state["answer"]["text"] == "the sum is 42"
    assert tool_messages(recording) == ["42"]  # computed by the server, shown to the model
    (event,) = tool_events(tmp_path / "run")
    assert event["name"] == "fx_add" and event["ok"] and event["text"] == "42"
    # the tools the model was offered are the server's, prefixed, minus the blocked one
    offered = {t["name"] for t in json.loads(recording.read_text())["interactions"][0]["request"]["tools"]}
    assert offered == {"fx_echo", "fx_add", "fx_whoami", "fx_record", "fx_big", "fx_stall", "fx_count"}


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_kill_9_of_the_server_mid_run_is_a_tool_error_and_the_next_call_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transport: str, request
) -> None:
    record = tmp_path / "record.txt"
    pid_file = tmp_path / "server.pid"
    if transport == "stdio":
        monkeypatch.setenv("FIXTURE_RECORD_FILE", str(record))
        monkeypatch.setenv("FIXTURE_PID_FILE", str(pid_file))
        server = stdio_server_entry()
    else:
        http = request.getfixturevalue("http_fixture")
        record = tmp_path / "http-record.txt"
        server = {"url": http.url}
    steps = [
        tool_step("fx_stall", {"seconds": 30}, "c1"),
        tool_step("fx_echo", {"text": "after the crash"}, "c2"),
        final_step("recovered"),
    ]

    async def kill_during_the_stall() -> None:
        await asyncio.to_thread(wait_for_line, record, "stall 30")
        if transport == "stdio":
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
        else:
            http.kill()
            http.start()  # the server comes back on its port; the client reconnects for the next call

    state, recording = await run_agent(tmp_path, server, steps, during=kill_during_the_stall)
    assert state["answer"]["text"] == "recovered"
    crashed, after = tool_messages(recording)
    assert crashed.startswith("ToolError: MCP server 'fixture' failed during tool 'stall'")
    assert "restarted for the next call" in crashed
    assert after == "after the crash"
    first, second = tool_events(tmp_path / "run")
    assert not first["ok"] and second["ok"]


def agentflow(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentflow.cli.main", *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # so the kill takes the run and its MCP server down together
    )


def test_resume_after_kill_9_of_the_run_does_not_repeat_a_completed_mcp_call(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    cassette = write_cassette(
        tmp_path / "cassette.json",
        [
            tool_step("fx_record", {"label": "charged the card"}, "c1"),
            tool_step("fx_stall", {"seconds": 30}, "c2"),
            final_step("done"),
        ],
    )
    workflow = str(write_workflow(tmp_path / "wf.yaml", stdio_server_entry()))
    runs = tmp_path / "runs"
    common = ["--json", "-o", str(runs), "--model", f"replay:{cassette}"]
    env = {"FIXTURE_RECORD_FILE": str(record)}
    proc = agentflow(["run", workflow, *common, "--thread-id", "t1", "--input", '{"task": "pay"}'], env)
    wait_for_line(record, "stall 30")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert record.read_text().splitlines() == ["charged the card", "stall 30"]

    # the model's two replies were journaled with the calls they asked for: the resumed run asks for the rest
    rest = write_cassette(tmp_path / "rest.json", [final_step("done")])
    resumed = agentflow(["run", workflow, "--json", "-o", str(runs), "--model", f"replay:{rest}", "--resume", "t1"],
                        {**env, "FIXTURE_STALL_SCALE": "0"})
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["status"] == "done" and result["state"]["answer"]["text"] == "done"
    # the completed call was replayed from the journal; the interrupted one ran again
    assert record.read_text().splitlines() == ["charged the card", "stall 30", "stall 30"]
    events = tool_events(Path(result["run_dir"]))
    replayed = [(e["name"], e["replayed"]) for e in events]
    assert ("fx_record", True) in replayed and ("fx_record", False) in replayed  # first run, then the replay
    assert [e["name"] for e in events if not e["replayed"]].count("fx_record") == 1
