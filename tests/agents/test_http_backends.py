"""The loop's conversation goes through the real OpenAI-compatible and Anthropic backends to a real HTTP
server on loopback (the model tests' scripted server, run as a process): tool calls and their results
must reach the provider paired by id, and usage must reach the budget."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from agentflow.agents import Agent, Plan
from agentflow.budget import Budget
from agentflow.models.spec import load_model
from agentflow.tools import ToolContext

from ..models.conftest import SERVER, FakeServer
from .conftest import PACK

PLAN = {"goal": "fix add", "steps": [{"description": "return a + b in calc.py", "files": ["calc.py"]}]}
FAST = {"retry_initial_s": 0.01, "retry_max_wait_s": 1.0, "timeout_s": 10, "max_attempts": 1}


@pytest.fixture(scope="module")
def llm_server() -> Iterator[FakeServer]:
    proc = subprocess.Popen([sys.executable, str(SERVER)], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("PORT "):
            pytest.fail(f"scripted LLM server did not start: {line!r}")
        yield FakeServer(int(line.split()[1]))
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _script(server: FakeServer) -> None:
    server.reset()
    server.script(
        {
            "tool_calls": [
                {"id": "call_a", "name": "read_file", "arguments": json.dumps({"path": "calc.py"})},
                {"id": "call_b", "name": "read_file", "arguments": json.dumps({"file": "calc.py"})},
            ]
        },
        {"tool_calls": [{"id": "call_c", "name": "list_files", "arguments": "{}"}]},
        {"content": "```json\n" + json.dumps(PLAN) + "\n```"},
    )


async def test_openai_compatible_backend(llm_server: FakeServer, ctx: ToolContext) -> None:
    _script(llm_server)
    budget = Budget()
    agent = Agent("planner", model=load_model(llm_server.spec("tiny"), **FAST), overrides=[f"tools=[{PACK}]"])
    result = await agent.run("fix add()", ctx=ctx, budget=budget)

    assert result.stop_reason == "done" and isinstance(result.output, Plan)
    bodies = [r["body"] for r in llm_server.requests()]
    assert len(bodies) == 3
    assert {t["function"]["name"] for t in bodies[0]["tools"]} >= {"read_file", "list_files"}
    sent = bodies[1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert [c["id"] for c in sent[2]["tool_calls"]] == ["call_a", "call_b"]
    results = {m["tool_call_id"]: m["content"] for m in sent[3:]}
    assert "return a - b" in results["call_a"]
    assert "'path' is required" in results["call_b"]  # the validation error went back to the model
    assert budget.used.model_calls == 3 and budget.used.tokens > 0


async def test_anthropic_backend(llm_server: FakeServer, ctx: ToolContext) -> None:
    _script(llm_server)
    model = load_model(
        "anthropic:claude-haiku-4-5", base_url=llm_server.root, api_key="sk-ant-test-000111", **FAST
    )
    agent = Agent("planner", model=model, overrides=[f"tools=[{PACK}]"])
    result = await agent.run("fix add()", ctx=ctx)

    assert result.stop_reason == "done" and isinstance(result.output, Plan)
    body = llm_server.requests()[1]["body"]
    assert "planner of a software engineering team" in json.dumps(body["system"])
    blocks = body["messages"][-1]["content"]
    assert [(b["type"], b["tool_use_id"]) for b in blocks] == [
        ("tool_result", "call_a"),
        ("tool_result", "call_b"),
    ]
    assert result.usage.tokens > 0
