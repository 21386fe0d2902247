"""Node functions for the search tests (importable as `tests.graph.search_nodes:NAME`). Each branch's
outcome is a function of its branch id (`ctx.run.branch` ends in `~b<k>`), so a test knows every value."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, TypedDict


def _index(ctx: Any) -> int:
    return int(str(ctx.run.branch).rsplit("~", 1)[-1][1:])


def attempt(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    k = _index(ctx)
    return {"answer": f"a{k % 3}", "score": (k * 37) % 10, "steps": [f"attempt b{k}"]}


def refine(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    k = _index(ctx)
    return {"score": int(state.get("score") or 0) + (k * 7) % 5, "steps": [f"refine b{k}"]}


def flaky(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    k = _index(ctx)
    if k % 2:
        raise RuntimeError(f"branch b{k} broke")
    return {"answer": f"a{k}", "score": k}


def broken(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    raise RuntimeError("every branch breaks")


def _append(a: list[str] | None, b: list[str] | None) -> list[str]:
    return [*(a or []), *(b or [])]


class SearchState(TypedDict, total=False):
    """The state of the builder test's workflows."""

    task: str
    answer: str
    score: int
    steps: Annotated[list[str], _append]
    report: dict[str, Any]


async def score_step(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """A step's value, after a journaled side effect (one line per branch step in the effects file); with
    AF_TEST_PAUSE_BRANCH=b<k> that branch waits to be killed right after its effect."""
    import asyncio
    import os
    from pathlib import Path

    k = _index(ctx)
    depth = int(state.get("depth") or 0) + 1
    if ctx.run.sandbox is not None:  # the branch's workspace: a trail of the steps of its lineage
        await ctx.run.sandbox.exec(f"echo b{k} >> trail.txt")
    await ctx.call_tool(_effect, {"path": state["effects"], "label": f"b{k}"})
    if os.environ.get("AF_TEST_PAUSE_BRANCH") == f"b{k}":
        Path(state["effects"] + ".ready").write_text("ready")
        await asyncio.sleep(60)
    return {"score": (k * 37) % 10, "depth": depth, "verdict": "more" if depth < 2 else "stop"}


def _effect(path: str, label: str) -> str:
    """Append `label` to the file at `path`."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(label + "\n")
    return f"wrote {label}"


def sampled(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Notes the branch's place among its siblings (`ctx.run.sample`), scored by its id as `attempt` is."""
    k = _index(ctx)
    return {"score": (k * 37) % 10, "steps": [f"b{k} sample {ctx.run.sample}"]}


async def edit_and_test(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Writes `b<k>.txt` into the branch's workspace and passes its tests when k is even."""
    k = _index(ctx)
    await ctx.run.sandbox.exec(f"echo 'made by b{k}' > b{k}.txt")
    return {"tests": {"ok": k % 2 == 0, "summary": f"b{k}: {'pass' if k % 2 == 0 else 'fail'}"}}


def streamed(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Sends a chunk naming its branch thread on the run's live stream (`ctx.stream`)."""
    ctx.stream(f"from {ctx.run.branch}")
    return {"score": _index(ctx)}


def killable_search(path: Path) -> Path:
    """A workflow file at `path` whose MCTS search (n=4, one branch at a time) asks a critic, then scores
    (`score_step`: a journaled effect per step, and with AF_TEST_PAUSE_BRANCH the kill point): for the tests
    that kill a run inside its search and resume it."""
    path.write_text(json.dumps({
        "name": "searched",
        "state": {"task": {"type": "str"}, "effects": {"type": "str"}, "critique": {"type": "dict"},
                  "score": {"type": "int"}, "depth": {"type": "int"}, "verdict": {"type": "str"},
                  "report": {"type": "dict"}},
        "nodes": {"go": {
            "search": {"strategy": "mcts", "n": 4, "expand": 2, "concurrency": 1, "value": "score",
                       "value_scale": 10, "step_until": ["score"]},
            "output": "report", "next": "END",
            "subgraph": {"name": "step", "nodes": {
                "ask": {"agent": "critic", "args": {"input": {"task": "task"}}, "output": "critique",
                        "next": "score"},
                "score": {"fn": "tests.graph.search_nodes:score_step", "writes": ["score", "depth", "verdict"],
                          "route": {"on": "verdict", "cases": {"more": "ask", "stop": "END"}}}}}}},
    }))
    return path


async def looped_step(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """A branch of a search in a loop: its value names the round (`rounds`) and the branch, after a journaled
    effect `r<round>:b<k>`; with AF_TEST_PAUSE_BRANCH=r<round>:b<k> that branch waits to be killed after it."""
    import asyncio
    import os

    k, rounds = _index(ctx), int(state.get("rounds") or 0)
    label = f"r{rounds}:b{k}"
    if state.get("effects"):
        await ctx.call_tool(_effect, {"path": state["effects"], "label": label})
        if os.environ.get("AF_TEST_PAUSE_BRANCH") == label:
            Path(state["effects"] + ".ready").write_text("ready")
            await asyncio.sleep(60)
    return {"score": k + 10 * rounds, "seen": [label]}


def next_round(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"rounds": int(state.get("rounds") or 0) + 1}


def looped_search(rounds: int, n: int) -> dict[str, Any]:
    """A workflow whose best_of_n search node (`pick`, n branches one at a time) runs `rounds` times in a loop
    (`pick -> bump -> pick ...`), each branch scored `looped_step`."""
    return {
        "name": "looped",
        "state": {"rounds": {"type": "int", "default": 0}, "effects": {"type": "str"}, "score": {"type": "int"},
                  "seen": {"type": "list"}, "report": {"type": "dict"}},
        "nodes": {
            "pick": {"search": {"strategy": "best_of_n", "n": n, "value": "score", "concurrency": 1,
                                "gather": ["seen"]},
                     "output": "report", "next": "bump",
                     "subgraph": {"name": "one", "nodes": {
                         "attempt": {"fn": "tests.graph.search_nodes:looped_step", "next": "END"}}}},
            "bump": {"fn": "tests.graph.search_nodes:next_round",
                     "route": {"when": {f"rounds >= {rounds}": "END"}, "default": "pick"}},
        },
    }


def kill_when_paused(proc: Any, effects: Path) -> None:
    """SIGKILL `proc` (a run of `killable_search` with AF_TEST_PAUSE_BRANCH) once that branch waits to be
    killed, right after its step's effect."""
    import os
    import signal
    import time

    ready, deadline = Path(f"{effects}.ready"), time.monotonic() + 120
    while not ready.exists():
        assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
        assert time.monotonic() < deadline, "the search never reached the branch to kill"
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def seed(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """What a node before the search made (the search's branches start from it)."""
    return {"answer": "made before the search", "steps": ["seed"]}


def tally(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """A node after the search: what reached it."""
    return {"score": len(state.get("steps") or [])}
