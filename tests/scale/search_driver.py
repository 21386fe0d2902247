"""The graph search on the Ray cluster: the node functions of the tests' workflow (importable on the workers
as `tests.scale.search_driver:NAME`), the workflow itself, and a driver for what only the Python API can
give a run (run as `python -m tests.scale.search_driver HOST:PORT`; prints one JSON object).

Each step of a branch appends a word to `notes.txt` in its workspace and checks first that the file holds
what its state says (its workspace travelled with it); the word, and so every value, is a function of the
branch's id, so a search gives the same tree wherever its steps run. Each step notes the pid it ran in.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

WORDS = ["yes", "no", "maybe", "yes", "no"]


def _index(ctx: Any) -> int:
    return int(str(ctx.run.branch).rsplit("~", 1)[-1][1:])


def start(state: dict[str, Any]) -> dict[str, Any]:
    """Before the search: where the run itself (the driver) runs."""
    return {"driver": os.getpid()}


async def write(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """With `pause: b<k>` in the state, branch b<k>'s first run of this node waits to be killed (after writing
    `<flag>.ready`); it goes on when run again."""
    k = _index(ctx)
    flag = Path(str(state.get("flag") or "")  + ".ready")
    if state.get("pause") == f"b{k}" and not flag.exists():
        flag.write_text(str(os.getpid()))
        await asyncio.sleep(300)
    notes = str(state.get("notes") or "")
    word = WORDS[(k * 3 + int(state.get("depth") or 0)) % len(WORDS)]
    sandbox = ctx.run.sandbox
    if sandbox is not None:
        held = await sandbox.read_file("notes.txt") if notes else ""
        if held != notes:
            raise RuntimeError(f"branch b{k}'s workspace holds {held!r}, its state {notes!r}")
        await sandbox.write_file("notes.txt", notes + word + "\n")
    return {"notes": notes + word + "\n", "pids": [os.getpid()], "steps": [f"b{k}: {word}"]}


async def check(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    notes = str(state.get("notes") or "")
    result = await ctx.call_tool(_count, {"text": notes})  # a journaled tool call, counted in the run's usage
    assert result.ok, result.text
    diff = ""
    if ctx.run.sandbox is not None:
        from agentflow.graph.run.workspace import workspace_diff

        diff = await workspace_diff(ctx.run.sandbox)
    depth = int(state.get("depth") or 0) + 1
    return {"score": notes.count("yes") * 4 + len(notes.split()), "depth": depth, "more": depth < 2, "diff": diff,
            "pids": [os.getpid()]}


def _count(text: str) -> int:
    """The number of words in `text`."""
    return len(text.split())


def workflow(search: dict[str, Any]) -> dict[str, Any]:
    """A workflow whose node `go` searches over two rounds of write -> check with the given `search:` settings
    (a step of the stepwise strategies ends after `check`)."""
    return {
        "name": "notes",
        "state": {"task": {"type": "str"}, "driver": {"type": "int"}, "notes": {"type": "str"},
                  "score": {"type": "int"}, "depth": {"type": "int"}, "more": {"type": "bool"}, "diff": {"type": "str"},
                  "pids": {"type": "list", "reducer": "append"}, "steps": {"type": "list", "reducer": "append"},
                  "report": {"type": "dict"}, "pause": {"type": "str"}, "flag": {"type": "str"}},
        "nodes": {
            "start": {"fn": "tests.scale.search_driver:start", "next": "go"},
            "go": {"search": {"value": "score", "value_scale": 10, "step_until": ["check"], **search},
                   "output": "report", "next": "END",
                   "subgraph": {"name": "step", "nodes": {
                       "write": {"fn": "tests.scale.search_driver:write", "next": "check"},
                       "check": {"fn": "tests.scale.search_driver:check",
                                 "route": {"on": "more", "cases": {"true": "write", "false": "END"}}}}}},
        },
    }


async def main(address: str) -> None:
    """A run whose dependencies cannot travel: the search says so in one line before any step starts."""
    from agentflow.errors import UserError
    from agentflow.executors.types import ExecutorConfig
    from agentflow.graph import WorkflowRunner
    from agentflow.graph.define.loader import spec_from_dict
    from agentflow.graph.run.context import RunHandles

    context = RunHandles(executor=ExecutorConfig(kind="ray", address=address), deps={"lock": threading.Lock()})
    runner = WorkflowRunner(spec_from_dict(workflow({"n": 2})), checkpointer="memory", context=context)
    out: dict[str, Any] = {}
    try:
        await runner.start({"task": "x"}, thread_id="t")
    except UserError as exc:
        out["error"] = str(exc)
    finally:
        await runner.aclose()
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
