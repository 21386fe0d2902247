"""Nodes that run together finish together: a node that fails waits for its siblings before it raises.

LangGraph runs the nodes of one step at once and, as soon as one of them raises, cancels the others: calls
the budget admitted are lost mid-call, uncharged. So every async node goes through `settled`: a node that
fails waits until each sibling still running in the same step (thread, graph, step number) has ended or is
failing too, then raises; the siblings' results are checkpointed and `resume` runs only the failed ones.
Interrupts (`GraphBubbleUp`) and cancellation are not failures: they pass at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig

STEP_START_YIELDS = 3
"""Loop turns a failing node yields before it counts its siblings: the tasks LangGraph started in the same
turn join their step first, so a node failing at once still finds them."""


@dataclasses.dataclass
class _Step:
    running: int = 0
    failing: int = 0
    changed: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    """Set (and replaced) whenever a node of the step ends or fails."""

    def settled(self) -> bool:
        return self.running - self.failing <= 0

    def touch(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


class Supersteps:
    """The steps with async nodes running, by (thread, graph namespace, step number)."""

    def __init__(self) -> None:
        self._steps: dict[tuple[str, str, int], _Step] = {}

    def join(self, key: tuple[str, str, int]) -> _Step:
        step = self._steps.setdefault(key, _Step())
        step.running += 1
        return step

    def leave(self, key: tuple[str, str, int], step: _Step, *, failed: bool) -> None:
        step.running -= 1
        step.failing -= 1 if failed else 0
        if step.running <= 0 and self._steps.get(key) is step:
            del self._steps[key]
        step.touch()

    @staticmethod
    async def fail(step: _Step) -> None:
        """This node failed: wait until every sibling still running has ended or failed too."""
        step.failing += 1
        step.touch()
        for _ in range(STEP_START_YIELDS):
            await asyncio.sleep(0)
        while not step.settled():
            await step.changed.wait()


def step_key(config: Mapping[str, Any]) -> tuple[str, str, int]:
    """(thread, the graph the node runs in, step number) of a node's task config."""
    conf = config.get("configurable") or {}
    task_ns = str(conf.get("checkpoint_ns") or "")
    graph_ns = task_ns.rsplit("|", 1)[0] if "|" in task_ns else ""
    step = int((config.get("metadata") or {}).get("langgraph_step", 0))
    return str(conf.get("thread_id", "")), graph_ns, step


AsyncNode = Callable[[Any, RunnableConfig], Awaitable[Any]]


def settled(steps: Supersteps, fn: AsyncNode) -> AsyncNode:
    """`fn`, an async node, raising its failure only once its step's siblings have ended (see the module)."""
    from langgraph.errors import GraphBubbleUp

    async def run(state: Any, config: RunnableConfig) -> Any:
        key = step_key(config)
        step = steps.join(key)
        failed = False
        try:
            return await fn(state, config)
        except GraphBubbleUp:
            raise
        except Exception:
            failed = True
            try:
                await steps.fail(step)
            except asyncio.CancelledError:
                pass  # a sibling's failure ended the step first: this node's own failure is what it records
            raise
        finally:
            steps.leave(key, step, failed=failed)

    run.__name__ = getattr(fn, "__name__", "node")
    return run


def settled_sync(steps: Supersteps, fn: Callable[..., Any]) -> Any:
    """A sync node as `settled` makes an async one (in an async run, in a worker thread as LangGraph runs it)."""
    from langchain_core.runnables import RunnableLambda
    from langchain_core.runnables.config import run_in_executor

    takes_config = len(inspect.signature(fn).parameters) >= 2

    async def in_thread(state: Any, config: RunnableConfig) -> Any:
        args = (state, config) if takes_config else (state,)
        return await run_in_executor(config, fn, *args)

    return RunnableLambda(fn, afunc=settled(steps, in_thread), name=getattr(fn, "__name__", None))


__all__ = ["Supersteps", "settled", "settled_sync", "step_key"]
