"""A scripted stand-in for a small local model playing plan_code_search_small's planner, coder and critic
(told apart by their system prompts), slow enough that each call outlasts a progress interval."""

from __future__ import annotations

import asyncio
from typing import Any

from agentflow.models.base import ChatRequest
from agentflow.models.testing import tool_call

CALL_S = 0.5
"""Seconds each reply takes (the test sets the progress interval well below it)."""


async def reply(request: ChatRequest) -> Any:
    await asyncio.sleep(CALL_S)
    system = str(request.messages[0].content)
    if system.startswith("You plan"):
        return {"goal": "make add() add", "steps": [{"description": "return a + b in add()", "files": ["calc.py"]}]}
    if system.startswith("You review"):
        return {"issues": [], "summary": "add() adds; the test passes"}
    asked = sum(1 for m in request.messages if m.role == "assistant")
    shown = "return a - b" in str(request.messages[1].content)  # the workflow put calc.py in the prompt
    if asked == 0 and not shown:
        return tool_call("view", path="calc.py")
    if asked == (0 if shown else 1):
        return tool_call("str_replace", path="calc.py", old_str="a - b", new_str="a + b")
    return {"summary": "add() returns a + b", "done": True}
