"""Node functions of the workflows in tests/cli (importable as `tests.cli.nodes:NAME`)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any


async def ask(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Complete `prompt` with the run's model (8 tokens); with `pause`, wait first (the Ctrl-C test)."""
    from agentflow.models.base import ChatRequest, Message

    if state.get("load_first") and ctx.run.chat_model is None:
        from agentflow.models.spec import load_model

        ctx.run.chat_model = load_model(ctx.run.model)  # a local: model starts its server here
        await ctx.run.chat_model.chat(ChatRequest(messages=[Message.user("Hi")], max_tokens=1))
    if state.get("pause"):
        marker = os.environ.get("AF_TEST_READY")
        if marker:
            Path(marker).write_text("ready")
        await asyncio.sleep(float(state["pause"]))
    model = ctx.run.chat_model  # set by --serve; with --model, load it as agent nodes do
    if model is None:
        from agentflow.models.spec import load_model

        model = ctx.run.chat_model = load_model(ctx.run.model)
    response = await model.chat(
        ChatRequest(messages=[Message.user(state["prompt"])], max_tokens=8, temperature=0.0, seed=1)
    )
    return {"text": response.text, "model": model.spec}


async def nap(state: dict[str, Any]) -> dict[str, Any]:
    """Sleep `nap` seconds (work that only the run's wall-clock limit cuts), then count itself in `naps`."""
    await asyncio.sleep(float(state["nap"]))
    return {"naps": int(state.get("naps") or 0) + 1}


def nothing(state: dict[str, Any]) -> dict[str, Any]:
    """A node that only joins or fans out."""
    return {}
