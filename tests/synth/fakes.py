"""Model functions for the rewrite tests (`function:tests.synth.fakes:NAME`)."""

from __future__ import annotations

import re

from agentflow.models.base import ChatRequest


def _asked(request: ChatRequest) -> str:
    text = request.messages[-1].content or ""
    return text.split("```python\n", 1)[1].rsplit("\n```", 1)[0]


def flip_first_comparison(request: ChatRequest) -> str:
    """Gives the function back with its first `<`/`>` flipped to `<=`/`>=` (unchanged when it has none)."""
    code = re.sub(r" ([<>]) ", r" \1= ", _asked(request), count=1)
    return f"Here it is:\n```python\n{code}\n```\n"


def rename(request: ChatRequest) -> str:
    """Gives back a function under another name (not a rewrite of the one asked about)."""
    code = re.sub(r"def (\w+)", r"def other_\1", _asked(request), count=1)
    return f"```python\n{code}\n```"
