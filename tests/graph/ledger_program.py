"""A Python program (no CLI) that runs planner -> coder -> check on a run folder, with a Docker sandbox holding
a copy of a workspace: what `test_python_resume.py` runs whole, kills with -9 mid-coder, and resumes.

    python ledger_program.py RUN_DIR WORKSPACE --model CASSETTE [--record OUT] [--hold] [--resume THREAD]

`--record OUT` writes every call to OUT, a cassette matched by request (the model: CASSETTE, in sequence);
`--hold` makes every model call that follows a tool result wait (to be killed); `--resume THREAD` continues
the thread from its last checkpoint. The last line on stdout is the run's result as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, TypedDict

from agentflow.graph import END, Workflow, WorkflowRunner
from agentflow.graph.run.context import RunHandles
from agentflow.models.base import ChatModel, ChatRequest, ChatResponse, StreamDelta


class State(TypedDict, total=False):
    task: str
    plan: dict[str, Any]
    code: dict[str, Any]
    check: dict[str, Any]


async def check(state: State, ctx: Any) -> dict[str, Any]:
    """Does add() add, in the sandbox's copy of the workspace?"""
    res = await ctx.run.sandbox.exec("python3 -c 'from calc import add; assert add(2, 3) == 5' && echo PASS")
    return {"check": {"ok": res.exit_code == 0, "output": (res.stdout + res.stderr).strip()[-300:]}}


def workflow() -> Workflow:
    wf = Workflow("fix_add", state=State)
    wf.agent("plan", "planner", output="plan", config={"tools": []})
    wf.agent("code", "coder", output="code", input={"task": "task", "plan": "plan"})
    wf.node("check", check, writes=["check"])
    return wf.edge("plan", "code").edge("code", "check").edge("check", END)


class Held:
    """The model, except that a call made after a tool result never returns (the process is killed there)."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.spec = inner.spec

    async def _hold(self, request: ChatRequest) -> None:
        if any(m.role == "tool" for m in request.messages):
            print("HOLDING", flush=True)
            await asyncio.sleep(3600)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        await self._hold(request)
        return await self.inner.chat(request)

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        await self._hold(request)
        async for delta in self.inner.stream(request):
            yield delta

    async def aclose(self) -> None:
        await self.inner.aclose()


def model(args: argparse.Namespace) -> Any:
    from agentflow.models.replay import RecordingModel, ReplayModel

    chosen: Any = ReplayModel(args.model)
    if args.record:
        chosen = RecordingModel(chosen, args.record, match="request")
    return Held(chosen) if args.hold else chosen


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir")
    parser.add_argument("workspace")
    parser.add_argument("--model", required=True)
    parser.add_argument("--record")
    parser.add_argument("--hold", action="store_true")
    parser.add_argument("--resume")
    args = parser.parse_args()
    context = RunHandles(chat_model=model(args))
    async with WorkflowRunner(workflow().spec, run_dir=args.run_dir, workspace=args.workspace,
                              context=context) as runner:
        if args.resume:
            result = await runner.resume(args.resume)
        else:
            result = await runner.start({"task": "add() subtracts; make it add"}, thread_id="t1")
        diff = await runner.diff()
    print(json.dumps({"status": result.status, "errors": {k: v.model_dump() for k, v in result.errors.items()},
                      "usage": result.usage.model_dump(), "diff": diff, "check": result.state.get("check")}))


if __name__ == "__main__":
    asyncio.run(main())
