"""Spans of real runs sent through the real OTLP/HTTP exporter to a receiver on 127.0.0.1, decoded with the
OpenTelemetry protobuf definitions: the tree and the GenAI attributes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agentflow.events import EventLog, read_events
from agentflow.graph import RunHandles, WorkflowRunner, load_workflow
from agentflow.models.replay import ReplayModel
from agentflow.observe import TraceConfig, instrument

from .conftest import Receiver

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW_CASSETTE = ROOT / "tests" / "graph" / "cassettes" / "plan_code_critique.json"
AGENT_CASSETTES = ROOT / "tests" / "agents" / "cassettes"


async def test_a_workflow_of_agents_becomes_a_genai_span_tree(otlp_receiver: Receiver, tmp_path: Path) -> None:
    events = EventLog(tmp_path / "events.jsonl", run_id="wf")
    assert instrument(events, TraceConfig(endpoint=otlp_receiver.url)) is not None
    ctx = RunHandles(events=events, chat_model=ReplayModel(WORKFLOW_CASSETTE))
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_cli.py").write_text("def test_runs():\n    assert True\n")  # the check node's tests must run
    async with WorkflowRunner(load_workflow("plan_code_critique"), run_dir=tmp_path / "run", context=ctx,
                              workspace=repo) as runner:
        assert (await runner.start({"task": "add a --verbose flag"}, thread_id="t")).status == "interrupted"
        assert (await runner.resume("t", approve=True)).status == "done"
    events.close()  # ends the translator: the batch is flushed to the receiver

    r = otlp_receiver
    assert r.paths and set(r.paths) == {"/v1/traces"}
    assert {s.resource.get("service.name") for s in r.spans} == {"agentflow"}
    runs = r.by_name("workflow plan_code_critique")
    assert len(runs) == 2 and all(s.parent_id == "" for s in runs)  # the start, then the resume
    first, resumed = sorted(runs, key=lambda s: s.start_ns)
    def nodes(run):  # beside its nodes a run's span holds only the checkpoints' workspace records (a diff each)
        children = r.children(run)
        assert {c.name for c in children if not c.name.startswith("node ")} <= {"sandbox.exec"}
        return [c.name for c in children if c.name.startswith("node ")]

    assert nodes(first) == ["node plan", "node approve_plan"]  # paused there
    assert nodes(resumed)[:5] == ["node approve_plan", "node code", "node check", "node critique", "node gate"]
    # every agent invocation sits in its graph node; every model call in its agent invocation
    agents = [s for s in r.spans if s.attributes.get("gen_ai.operation.name") == "invoke_agent"]
    assert {a.attributes["gen_ai.agent.name"] for a in agents} == {"planner", "coder", "critic"}
    for agent in agents:
        assert r.parent_of(agent) is not None and r.parent_of(agent).name.startswith("node ")
    chats = [s for s in r.spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(chats) == sum(1 for e in read_events(tmp_path / "events.jsonl") if e.kind == "model.call")
    for chat in chats:
        assert r.parent_of(chat).attributes.get("gen_ai.operation.name") == "invoke_agent"
        a = chat.attributes
        assert a["gen_ai.provider.name"] == "replay" and a["gen_ai.request.model"].endswith("plan_code_critique.json")
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
        assert a["gen_ai.response.finish_reasons"] == ["stop"]
        assert "gen_ai.input.messages" not in a  # contents only when opted in
        assert chat.kind == 3  # SPAN_KIND_CLIENT
        assert first.start_ns <= chat.start_ns <= chat.end_ns or resumed.start_ns <= chat.start_ns <= chat.end_ns


async def test_tool_calls_and_opt_in_contents_with_secrets_redacted(
    otlp_receiver: Receiver, tmp_path: Path, monkeypatch
) -> None:
    from agentflow.agents import Agent, load_agent_config
    from agentflow.tools import ToolContext

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "check.py").write_text("from calc import add\nassert add(2, 3) == 5\nprint('check passed')\n")
    monkeypatch.setenv("CALC_API_KEY", "sk-calc-0123456789abcdef")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_receiver.url)  # the standard variable this time
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    events = EventLog(tmp_path / "events.jsonl", run_id="agent")
    instrument(events, TraceConfig())
    config = load_agent_config("coder", ["tools=[tests.agents.repo_tools]"])
    agent = Agent(config, model=ReplayModel(AGENT_CASSETTES / "coder.json"))
    ctx = ToolContext(events=events, state={"root": str(repo)})
    task = {"task": "fix add(); the key sk-calc-0123456789abcdef must never leak", "plan": {"steps": []}}
    result = await agent.run(task, ctx=ctx)
    events.close()
    assert result.stop_reason == "done"

    r = otlp_receiver
    (invoke,) = r.by_name("invoke_agent coder")
    tools = [s for s in r.spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    assert tools and all(r.parent_of(t) is invoke for t in tools)
    names = [t.attributes["gen_ai.tool.name"] for t in sorted(tools, key=lambda s: s.start_ns)]
    tool_events = [e.data["name"] for e in read_events(tmp_path / "events.jsonl") if e.kind == "tool.call"]
    assert names == tool_events  # one span per tool.call event, in order
    assert all(t.attributes["gen_ai.tool.call.id"] for t in tools)
    assert any("check passed" in t.attributes["gen_ai.tool.call.result"] for t in tools)
    chats = r.by_name("chat ")
    assert chats and all(r.parent_of(c) is invoke for c in chats)
    first = json.loads(chats[0].attributes["gen_ai.input.messages"])
    assert any("fix add()" in (m.get("content") or "") for m in first)  # opted in: contents are there...
    everything = json.dumps([s.attributes for s in r.spans])
    assert "sk-calc-0123456789abcdef" not in everything and "***" in everything  # ...with the secret redacted
    assert invoke.attributes["gen_ai.usage.input_tokens"] > 0


def test_no_endpoint_means_no_exporter_and_no_connection(tmp_path: Path) -> None:
    """A whole `agentflow run` in a fresh interpreter, watched by an audit hook: no socket connects, no exporter
    is imported (LangGraph's langsmith imports the SDK by itself when installed, so that is not a sign), and the
    events file is written as usual."""
    script = f"""
import sys
connects = []
sys.addaudithook(lambda event, args: connects.append(args) if event == "socket.connect" else None)
from agentflow.cli.main import run
code = run(["run", "tests/graph/approval.yaml", "-o", {str(tmp_path)!r}, "--input", '{{"topic": "otel"}}', "--json"])
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry.exporter"))
print("RESULT", code, len(connects), loaded)
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", script], check=False, cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT"))
    assert line == "RESULT 0 0 []", out.stdout + out.stderr
    assert list(tmp_path.glob("*/events.jsonl"))
