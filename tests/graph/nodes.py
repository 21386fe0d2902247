"""Node functions and tools used by the graph tests (importable as `tests.graph.nodes:NAME`)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from agentflow.budget import BudgetExceeded


def effect(path: str, label: str) -> str:
    """Append `label` to the file at `path` (a side effect the crash test counts)."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(label + "\n")
    return f"wrote {label}"


async def work(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """One loop round: a journaled side effect, then (in the crash test) wait to be killed."""
    n = int(state.get("count") or 0)
    result = await ctx.call_tool(effect, {"path": state["effects"], "label": f"round {n}"})
    marker = os.environ.get("AF_TEST_PAUSE_AT")
    if marker is not None and int(marker) == n:
        Path(state["effects"] + ".ready").write_text("ready")
        await asyncio.sleep(60)  # the test kills the process here, after the effect and its journal entry
    return {
        "count": n + 1,
        "log": [result.text],
        "status": "done" if n + 1 >= int(state["rounds"]) else "more",
    }


def finish(state: dict[str, Any]) -> dict[str, Any]:
    return {"summary": f"{state['count']} rounds: " + "; ".join(state["log"])}


def write_draft(state: dict[str, Any]) -> dict[str, Any]:
    return {"draft": f"draft about {state.get('topic', 'nothing')}"}


def publish(state: dict[str, Any]) -> dict[str, Any]:
    return {"published": state["draft"].upper()}


async def write_a(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Fork test, first node: writes a.txt in the run's sandbox with the state's tag."""
    await ctx.run.sandbox.write_file("a.txt", f"a {state['tag']}\n")
    return {"a_tag": state["tag"]}


async def write_b(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Fork test, second node: records what the workspace held when it started, then changes a.txt and
    writes b.txt (so a fork from before it shows whether the workspace was rolled back)."""
    sb = ctx.run.sandbox
    seen = await sb.exec("cat a.txt; test -e b.txt && echo has-b || echo no-b")
    await sb.write_file("a.txt", f"a changed by b {state['tag']}\n")
    await sb.write_file("b.txt", f"b {state['tag']}\n")
    return {"b_saw": seen.stdout.strip(), "b_tag": state["tag"]}


SLOW_NODE = {"seconds": 10.0}
"""How long `slow_step` waits (a test shortens it before resuming)."""


async def slow_step(state: dict[str, Any]) -> dict[str, Any]:
    """Work that is no model or tool call (only the run's own wall-clock cut stops it)."""
    await asyncio.sleep(SLOW_NODE["seconds"])
    return {"summary": "slow step done"}


async def draft_until_the_deadline(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Drafts until the run's wall-clock limit cuts it, then ends with what it has (as a search node does)."""
    try:
        async with ctx.run.budget.deadline():
            await asyncio.sleep(60)
    except BudgetExceeded:
        pass
    return {"draft": "cut short"}


def summarize(state: dict[str, Any]) -> dict[str, Any]:
    """A step that takes no time."""
    return {"summary": f"summary of {state['draft']}"}


FORK_ATTEMPT = 9
"""The attempt number `branch_write` writes in a run that is no search branch (a fork of one)."""


def _branch_index(ctx: Any) -> int:
    if ctx.run.branch is None:
        return FORK_ATTEMPT
    return int(str(ctx.run.branch).rsplit("~", 1)[-1][1:])


async def branch_write(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Branch-fork test: a search branch `b<k>` writes attempt.txt in its own workspace."""
    k = _branch_index(ctx)
    await ctx.run.sandbox.write_file("attempt.txt", f"attempt {k}\n")
    return {"attempt_no": k}


async def branch_check(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Branch-fork test: reads attempt.txt from the workspace it runs in (a fork: the branch's, as it was at
    the checkpoint) and the attempt number from the state; even attempts pass."""
    seen = (await ctx.run.sandbox.exec("cat attempt.txt")).stdout.strip()
    no = int(state["attempt_no"])
    return {"saw": seen, "tests": {"ok": no % 2 == 0 and seen == f"attempt {no}", "no": no}}


LOOP_STEPS = 6
"""How many times `count_step` runs before the prune test's workflow pauses."""


def count_step(state: dict[str, Any]) -> dict[str, Any]:
    """Prune test: one loop step (a checkpoint each), then on to the approval."""
    n = int(state.get("n") or 0) + 1
    return {"n": n, "log": [f"step {n}"], "more": "yes" if n < LOOP_STEPS else "no"}
