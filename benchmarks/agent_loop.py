"""Overhead of the agent loop itself: a replayed model (no network) and a trivial tool, many steps.

Prints one JSON object: steps, total seconds, milliseconds per step (model call + tool call + bookkeeping).
Run: .venv/bin/python benchmarks/agent_loop.py [STEPS]
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from agentflow.agents import Agent, AgentConfig
from agentflow.budget import Budget
from agentflow.events import EventLog
from agentflow.models.replay import ReplayModel
from agentflow.tools import ToolContext, ToolRegistry, tool


@tool
def echo(text: str) -> str:
    """Return the text."""
    return text


def _cassette(path: Path, steps: int) -> None:
    def reply(content: str | None, calls: list[dict[str, object]]) -> dict[str, object]:
        message = {"role": "assistant", "content": content, "tool_calls": calls}
        return {
            "response": {"choices": [{"message": message}], "usage": {"input_tokens": 10, "output_tokens": 5}}
        }

    interactions = [
        reply(None, [{"id": f"c{i}", "name": "echo", "arguments": {"text": f"step {i}"}}])
        for i in range(steps)
    ]
    interactions.append(reply("all done", []))
    path.write_text(json.dumps({"version": 1, "match": "sequence", "interactions": interactions}))


async def main(steps: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        cassette = Path(tmp) / "loop.json"
        _cassette(cassette, steps)
        agent = Agent(
            AgentConfig(name="bench", step_limit=steps + 1),
            model=ReplayModel(cassette),
            tools=ToolRegistry([echo]),
        )
        events = EventLog(Path(tmp) / "events.jsonl", run_id="bench")
        start = time.perf_counter()
        result = await agent.run("echo many times", ctx=ToolContext(events=events), budget=Budget())
        seconds = time.perf_counter() - start
        events.close()
    assert result.stop_reason == "done", result.stop_reason
    return {
        "benchmark": "agent_loop",
        "steps": result.steps,
        "seconds": round(seconds, 4),
        "ms_per_step": round(1000 * seconds / result.steps, 3),
        "messages": len(result.messages),
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))))
