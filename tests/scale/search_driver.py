"""A driver process for the search tests: runs best-of-N and MCTS over local sandboxes in process and with
`executor` on the Ray cluster at argv[1], and prints one JSON object comparing them.

    python -m tests.scale.search_driver 127.0.0.1:PORT
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from agentflow.budget import Budget
from agentflow.events import EventLog
from agentflow.executors.types import ExecutorConfig
from agentflow.models.base import Usage
from agentflow.search import MCTS, BestOfN, FunctionVerifier, StepPolicy, WorkspacePool
from agentflow.search.protocols import RolloutContext
from agentflow.search.remote import SandboxShipper
from agentflow.search.types import Action, NodeState, Verification

WORDS = ["yes", "no", "maybe", "yes"]


class NotesPolicy(StepPolicy):
    """Each step appends a sampled word to notes.txt in the workspace; after `steps` steps the file is the
    output. A step first checks that the workspace holds what its state says (the snapshot travelled)."""

    def __init__(self, steps: int = 2) -> None:
        self.steps = steps
        self.max_steps = steps

    async def propose(self, state: NodeState, k: int, ctx: RolloutContext) -> list[Action]:
        ctx.charge_model(Usage(input_tokens=10, output_tokens=5, cost_usd=0.001), calls=1)
        return [Action(text=word, data={"word": word}) for word in (ctx.rng.choice(WORDS) for _ in range(k))]

    async def apply(self, state: NodeState, action: Action, ctx: RolloutContext) -> NodeState:
        ws: Any = ctx.workspace
        text = state.data.get("text", "")
        if text and await ws.read_file("notes.txt") != text:
            raise RuntimeError(f"workspace of {ctx.node_id} is not at its parent's state")
        text += action.data["word"] + "\n"
        await ws.write_file("notes.txt", text)
        ctx.charge_tool()
        done = state.depth + 1 >= self.steps
        pids = [*state.data.get("pids", []), os.getpid()]
        return state.child(done=done, output=text if done else None, data={"text": text, "pids": pids})


def score(cand: Any) -> Verification:
    text = cand.state.output or cand.state.data.get("text", "")
    return Verification(score=text.count("yes") / 2, passed=text.count("yes") == 2)


def summary(result: Any, budget: Budget) -> dict[str, Any]:
    return {"best": result.best.output if result.best else None,
            "candidates": sorted((c.node_id, c.state.output) for c in result.candidates),
            "used": {k: v for k, v in budget.used.model_dump().items() if k != "wall_seconds"},
            "pids": sorted({p for c in result.candidates for p in c.state.data.get("pids", [])})}


async def one(kind: str, executor: Any, boxes: list[Any]) -> dict[str, Any]:
    shipper = SandboxShipper("local") if executor is not None else None
    verifier = FunctionVerifier(score, name="yes")
    if kind == "best_of_n":
        search: Any = BestOfN(NotesPolicy(), verifier, n=4, concurrency=4, seed=3, executor=executor,
                              shipper=shipper)
    else:
        search = MCTS(NotesPolicy(), verifier, k=2, concurrency=2, max_depth=2, max_expansions=3, seed=3,
                      stop_on_solution=False, executor=executor, shipper=shipper)
    budget = Budget()
    result = await search.run(budget=budget, events=EventLog(), workspaces=WorkspacePool(boxes))
    return summary(result, budget)


async def main(address: str) -> None:
    from agentflow.sandbox.local import LocalSandbox

    store = Path(tempfile.mkdtemp(prefix="search-store-"))
    boxes = [await LocalSandbox.start(store=store) for _ in range(2)]
    out: dict[str, Any] = {"driver_pid": os.getpid()}
    try:
        for kind in ("best_of_n", "mcts"):
            out[kind] = {"in_process": await one(kind, None, boxes),
                         "ray": await one(kind, ExecutorConfig(kind="ray", address=address), boxes)}
    finally:
        for box in boxes:
            await box.close()
        shutil.rmtree(store, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
