"""A scripted stand-in for a small local model playing plan_code_search_small's planner, coder and critic
(told apart by their system prompts), slow enough that each call outlasts a progress interval."""

from __future__ import annotations

import asyncio
from typing import Any

from agentflow.models.base import ChatRequest

CALL_S = 0.5
"""Seconds each reply takes (the test sets the progress interval well below it)."""


async def reply(request: ChatRequest) -> Any:
    await asyncio.sleep(CALL_S)
    system = str(request.messages[0].content)
    if system.startswith("You plan"):
        return {"goal": "make add() add", "steps": [{"description": "return a + b in add()", "files": ["calc.py"]},
                                                   {"description": "a test of add", "files": ["test_add_more.py"]}]}
    if system.startswith("You review"):
        return {"issues": [], "summary": "add() adds; the test passes"}
    if "return a - b" not in str(request.messages[1].content):  # the workflow did not put calc.py in the prompt
        return "I cannot see calc.py."
    if "Your last answer: noop" not in str(request.messages[1].content):  # first try: the code given back unchanged
        return "```python\ndef mul(a, b):\n    return a * b\n\n\ndef add(a, b):\n    return a - b\n```"
    # told it changed nothing, as the 1.5B model mostly answers: the whole file given back, one function fixed
    # (not the first)
    return "The fix:\n```python\ndef mul(a, b):\n    return a * b\n\n\ndef add(a, b):\n    return a + b\n```"
