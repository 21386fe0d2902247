"""The embedding kit: typed dependencies reach tools (agent, tool and function nodes) and function nodes with no
globals; `run_sync` runs an agent or a workflow from synchronous code (one loop kept across calls, the
sandbox closed with the runner) and refuses a running loop; the test models drive agents and whole
workflows wherever a model is accepted; `ctx.deps` is typed for mypy."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import pytest
from pydantic import BaseModel

from agentflow import Agent, FunctionModel, NodeContext, RunHandles, TestModel, ToolContext, tool, tool_call
from agentflow.errors import UserError
from agentflow.graph import END, Workflow, WorkflowRunner, spec_from_dict
from agentflow.models import ChatRequest
from agentflow.tools import ToolRegistry

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Deps:
    name: str
    log: list[str] = field(default_factory=list)


@tool
def remember(note: str, ctx: ToolContext[Deps]) -> str:
    """Write a note to the app's log.

    Args:
        note: what to remember.
    """
    ctx.deps.log.append(f"{ctx.deps.name}:{note}")
    return "noted"


class Answer(BaseModel):
    summary: str
    count: int


def _agent(model: Any, **kwargs: Any) -> Agent:
    return Agent({"name": "helper", "tools": []}, model=model, tools=ToolRegistry([remember]),
                 output_type=Answer, **kwargs)


def test_tools_get_the_run_deps_else_the_context_deps_else_the_agent_deps() -> None:
    own, ctx_deps, run_deps = Deps("agent"), Deps("ctx"), Deps("run")
    agent = _agent(TestModel(), deps=own)
    assert agent.run_sync("go").ok and own.log == ["agent:a"]
    assert agent.run_sync("go", ctx=ToolContext(deps=ctx_deps)).ok and ctx_deps.log == ["ctx:a"]
    assert agent.run_sync("go", ctx=ToolContext(deps=ctx_deps), deps=run_deps).ok and run_deps.log == ["run:a"]
    assert own.log == ["agent:a"] and ctx_deps.log == ["ctx:a"]


def test_the_test_model_gets_the_output_schema_without_structured_output() -> None:
    model = TestModel()
    result = _agent(model, deps=Deps("d")).run_sync("go")
    assert result.ok and isinstance(result.output, Answer)
    assert model.last_request.response_schema == Answer.model_json_schema()

    class Plain(FunctionModel):  # a model that does not ask for it keeps the old request shape
        reads_response_schema = False

    plain = Plain(lambda request: Answer(summary="s", count=1))
    assert _agent(plain).run_sync("go").ok and plain.last_request.response_schema is None


async def test_run_sync_inside_a_running_loop_says_to_await() -> None:
    agent = _agent(TestModel())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no coroutine left un-awaited behind the error
        with pytest.raises(UserError, match=r"Agent.run_sync\(\) cannot run inside a running event loop.*await agent.run"):
            agent.run_sync("go")
    runner = WorkflowRunner(_workflow(TestModel()).spec, checkpointer="memory")
    with pytest.raises(UserError, match=r"await runner.start"):
        runner.run_sync({"task": "x"})
    runner.close()


class S(TypedDict, total=False):
    task: str
    answer: dict[str, Any]
    tool_out: str
    seen_by_node: str


def _stamp(state: S, ctx: NodeContext[Deps]) -> dict[str, Any]:
    ctx.deps.log.append("node")
    return {"seen_by_node": ctx.deps.name}


def _workflow(model: Any = None) -> Workflow:
    options: dict[str, Any] = {"tools": [remember], "output_type": Answer, "config": {"tools": []}}
    if model is not None:
        options["model"] = model
    wf = Workflow("kit", state=S)
    wf.agent("helper", "planner", output="answer", **options)
    wf.tool("note", "remember", {"note": "{task}"}, output="tool_out")
    wf.node("stamp", _stamp)
    wf.edge("helper", "note").edge("note", "stamp").edge("stamp", END)
    return wf.start("helper")


def test_workflow_deps_reach_agent_tools_tool_nodes_and_function_nodes() -> None:
    deps = Deps("app")
    model = TestModel()
    context = RunHandles(chat_model=model, tools={"remember": remember})
    with WorkflowRunner(_workflow().spec, checkpointer="memory", context=context, deps=deps) as runner:
        run = runner.run_sync({"task": "ship"})
    assert run.status == "done", run.errors
    assert deps.log == ["app:a", "app:ship", "node"]  # agent's tool call, tool node, function node
    assert run.state["seen_by_node"] == "app" and run.state["tool_out"] == "noted"
    Answer.model_validate(run.state["answer"])
    assert len(model.requests) == 2  # one call with every tool, one answer


def test_a_node_model_can_be_a_function_model_object_or_a_test_spec(tmp_path: Path) -> None:
    def reply(request: ChatRequest) -> Any:
        if not any(m.role == "tool" for m in request.messages):
            return tool_call("remember", note="from the function")
        return Answer(summary="done", count=len(request.messages))

    deps = Deps("fn")
    context = RunHandles(tools={"remember": remember})
    with WorkflowRunner(_workflow(FunctionModel(reply)).spec, checkpointer="memory", context=context,
                        deps=deps) as runner:
        run = runner.run_sync({"task": "t"})
    assert run.status == "done" and run.state["answer"]["summary"] == "done"
    assert deps.log[0] == "fn:from the function"

    spec = spec_from_dict({
        "name": "yaml_kit", "model": "test:seed=2",
        "state": {"task": {"type": "str"}, "plan": {"type": "dict"}},
        "nodes": {"plan": {"agent": "planner", "output": "plan", "args": {"config": {"tools": []}}, "next": "END"}},
    })
    with WorkflowRunner(spec, run_dir=tmp_path) as runner:
        run = runner.run_sync({"task": "t"})
    assert run.status == "done" and run.state["plan"]["steps"], run.errors


def test_run_sync_and_resume_sync_share_one_loop_and_close_the_sandbox(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("one\n")

    async def edit(state: S, ctx: NodeContext[Deps]) -> dict[str, Any]:
        await ctx.run.sandbox.write_file("a.txt", f"{ctx.deps.name}\n")
        return {"tool_out": "edited"}

    wf = Workflow("pause", state=S).node("edit", edit).interrupt("check", "ok?").node("stamp", _stamp)
    wf.edge("edit", "check").edge("check", "stamp").edge("stamp", END).start("edit")
    runner = WorkflowRunner(wf.spec, run_dir=tmp_path / "run", sandbox="local", workspace=workspace,
                            deps=Deps("synced"))
    first = runner.run_sync({"task": "x"})
    assert first.status == "interrupted"
    sandbox = runner.context.sandbox
    root = Path(sandbox.root)
    done = runner.resume_sync(first.thread_id, approve=True)
    assert done.status == "done" and done.state["seen_by_node"] == "synced"
    assert runner.context.sandbox is sandbox and (root / "workspace" / "a.txt").read_text() == "synced\n"
    runner.close()
    assert runner.context.sandbox is None and not root.exists()
    assert (workspace / "a.txt").read_text() == "one\n"  # the user's folder is never written


def test_a_second_runner_after_run_sync_works_in_async_code(tmp_path: Path) -> None:
    """run_sync's loop is the runner's own: asyncio.run afterwards (a new loop) is unaffected."""
    with WorkflowRunner(_workflow().spec, checkpointer="memory", context=RunHandles(
            chat_model=TestModel(), tools={"remember": remember}), deps=Deps("x")) as runner:
        assert runner.run_sync({"task": "a"}).ok

    async def again() -> bool:
        async with WorkflowRunner(_workflow().spec, checkpointer="memory", context=RunHandles(
                chat_model=TestModel(), tools={"remember": remember}), deps=Deps("y")) as other:
            return (await other.start({"task": "b"})).ok

    assert asyncio.run(again())


TYPED = '''
from dataclasses import dataclass
from agentflow.graph.run.context import NodeContext
from agentflow.tools.context import ToolContext

@dataclass
class Db:
    url: str

def tool_fn(ctx: ToolContext[Db]) -> str:
    reveal_type(ctx.deps)
    return ctx.deps.url

def node_fn(state: dict, ctx: NodeContext[Db]) -> dict:
    reveal_type(ctx.deps.url)
    ctx.deps.uri
    return {}

def untyped(ctx: ToolContext) -> None:
    reveal_type(ctx.deps)
'''


@pytest.mark.slow
def test_mypy_sees_the_type_of_ctx_deps(tmp_path: Path) -> None:
    (tmp_path / "typed.py").write_text(TYPED)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent", "--cache-dir", str(tmp_path / "c"),
         "--no-error-summary", str(tmp_path / "typed.py")],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600, check=False,
    )
    lines = [line.split(": ", 1)[1] for line in proc.stdout.splitlines() if "typed.py" in line]
    assert lines == [
        'note: Revealed type is "typed.Db"',
        'note: Revealed type is "str"',
        'error: "Db" has no attribute "uri"  [attr-defined]',
        'note: Revealed type is "Any"',
    ], proc.stdout + proc.stderr
