"""Agent nodes of a workflow: their options (checked, never silently dropped) and the node callable.

    code:
      agent: coder                       # a role, or a YAML agent file
      args:
        input: {task: task, plan: plan}  # template variable -> state key or dotted path (or one state key)
        model: openai:gpt-4o-mini        # this node's model (else --model, else the workflow's model:)
        config: {step_limit: 20}         # AgentConfig overrides
      on_error: fix                      # where to go when the agent ends without an answer

An agent that ends without a usable answer fails the node (see `agentflow.graph.run.outcome`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationError

from agentflow.config import StrictConfig
from agentflow.errors import UserError, did_you_mean
from agentflow.events.kinds import NodeEnd, NodeFailure
from agentflow.graph.run.context import NodeContext
from agentflow.graph.run.outcome import NODE_ERRORS, NodeError, NodeFailed
from agentflow.graph.run.streaming import RESULT_CHARS, TokenStreamingModel, send
from agentflow.graph.search.tree import read_path
from agentflow.models.base import ModelWrapper
from agentflow.tools.context import ToolContext
from agentflow.tools.decorator import Tool
from agentflow.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from agentflow.graph.define.spec import NodeSpec, WorkflowSpec
    from agentflow.graph.run.context import RunHandles


class AgentNodeOptions(StrictConfig):
    """The `args:` of an agent node."""

    input: str | dict[str, str] = "task"
    """A state key whose value is the task, or template variable -> state key or dotted path."""
    model: Any = None
    """This node's model: a spec string or a ChatModel instance (else the run's model)."""
    config: dict[str, Any] = Field(default_factory=dict)
    """AgentConfig overrides for this node, e.g. {step_limit: 20, tools: [shell]}."""
    tools: list[Any] = Field(default_factory=list)
    """Extra tools for this node: `Tool` objects or plain functions (Python builder)."""
    output_type: Any = None
    """A pydantic model class the answer must follow (replaces the role's output schema)."""
    mcp_servers: list[str] | None = None
    """Names of the workflow's `mcp_servers:` whose tools this agent gets (default: all of them)."""


def node_options(name: str, node: NodeSpec) -> AgentNodeOptions:
    """The node's options, or a one-line UserError naming the unknown or bad option."""
    try:
        return AgentNodeOptions.model_validate(node.args)
    except ValidationError as exc:
        raise UserError(_option_error(name, exc.errors()[0])) from None


def _option_error(name: str, err: Any) -> str:
    where = ".".join(str(p) for p in err["loc"])
    if err["type"] != "extra_forbidden":
        return f"agent node '{name}': option '{where}': {err['msg']}"
    fields = AgentNodeOptions.model_fields
    return f"agent node '{name}': unknown option '{where}'{did_you_mean(where, fields)} (options: {', '.join(fields)})"


def option_problems(name: str, node: NodeSpec, check_pack: Callable[[str], str | None] | None = None) -> list[str]:
    """Every problem of an agent node's options (options, role, config overrides, tool packs, model spec), one
    line each. `check_pack` says why a tool pack is bad (default: `CodeCheck` reads it, without importing)."""
    problems: list[str] = []
    try:
        options = AgentNodeOptions.model_validate(node.args)
    except ValidationError as exc:
        problems.extend(_option_error(name, err) for err in exc.errors())
        known_ok = {k: v for k, v in node.args.items() if k in ("config", "model") and isinstance(v, (dict, str))}
        try:
            options = AgentNodeOptions.model_validate(known_ok)
        except ValidationError:
            return problems
    try:
        config = _agent_config(node, options)
    except UserError as exc:
        return [*problems, f"agent node '{name}': {exc}"]
    if check_pack is None:
        from pathlib import Path

        from agentflow.graph.check.static_code import CodeCheck

        check_pack = CodeCheck(Path(".")).pack_problem
    for pack in config.tools:
        if bad := check_pack(pack):
            problems.append(f"agent node '{name}': tool pack {pack!r}: {bad}")
    if isinstance(options.model, str):
        try:
            from agentflow.models.spec import parse_spec

            parse_spec(options.model)
        except UserError as exc:
            problems.append(f"agent node '{name}': model: {exc}")
    return problems


def _agent_config(node: NodeSpec, options: AgentNodeOptions) -> Any:
    from agentflow.agents.roles import load_agent_config

    overrides = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in options.config.items()]
    return load_agent_config(node.agent or "", overrides)


def _model_for(name: str, options: AgentNodeOptions, rt: RunHandles, spec: WorkflowSpec) -> Any:
    """The node's own model, else the run's shared model, else a UserError naming the fix. A model named by a
    spec is built when the node first calls it: compiling a workflow starts no model server."""
    if options.model is not None and not isinstance(options.model, str):
        return options.model
    if isinstance(options.model, str):
        own = options.model
        return LazyModel(own, lambda: rt.model_for(own))
    if rt.chat_model is not None:
        return rt.chat_model
    model_spec = rt.model or spec.model
    if model_spec is None:
        raise UserError(f"agent node '{name}' needs a model",
                        hint="pass --model SPEC, set model: in the workflow or args.model on the node")

    def shared() -> Any:
        if rt.chat_model is None:  # the first agent node to call builds the run's model for all of them
            rt.chat_model = rt.model_for(model_spec)
        return rt.chat_model

    return LazyModel(model_spec, shared)


def load_shared_model(spec: WorkflowSpec, rt: RunHandles) -> None:
    """Build the run's shared model as a run starts when an agent node of `spec` or its subgraphs uses it (so
    search branches, whose contexts are copies of `rt`, share it)."""
    model_spec = rt.model or spec.model
    if rt.chat_model is None and model_spec is not None and _uses_shared_model(spec):
        rt.chat_model = rt.model_for(model_spec)


def _uses_shared_model(spec: WorkflowSpec) -> bool:
    for node in spec.nodes.values():
        if node.agent is not None and node.args.get("model") is None:
            return True
        sub = node.subgraph
        if sub is not None and not isinstance(sub, (str, dict)) and _uses_shared_model(sub):
            return True
    return False


class LazyModel(ModelWrapper):
    """A ChatModel built by `build()` on its first use (a call, or a question about its capabilities)."""

    def __init__(self, spec: str, build: Callable[[], Any]) -> None:  # no inner model yet: `inner` builds it
        self.spec = spec
        self._build = build
        self._model: Any = None

    @property
    def inner(self) -> Any:  # type: ignore[override]  # built, never assigned
        if self._model is None:
            self._model = self._build()
        return self._model

    async def aclose(self) -> None:
        return None  # the model belongs to whoever built it: the run's context, or the node's spec

    def __getattr__(self, name: str) -> Any:  # capabilities (supports_tools, profile...) of the built model
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.inner, name)


def build_agent_node(name: str, node: NodeSpec, rt: RunHandles, spec: WorkflowSpec) -> Any:
    """The graph node running `node.agent`; a failed agent routes to `on_error` or raises NodeFailed."""
    from langchain_core.runnables import RunnableConfig

    from agentflow.agents import Agent

    options = node_options(name, node)
    config = _agent_config(node, options)
    model = _model_for(name, options, rt, spec)
    tools = None
    if options.tools:
        packs = [*config.tools, *(t for t in options.tools if isinstance(t, str))]
        tools = ToolRegistry.from_packs(packs)
        for extra in options.tools:
            if not isinstance(extra, str):
                tools.add(extra if isinstance(extra, Tool) else Tool(extra))
    agent = Agent(config, model=TokenStreamingModel(model, name), tools=tools, output_type=options.output_type)
    output_key = node.output or name
    on_error = getattr(node, "on_error", None)

    async def run(state: Any, config: RunnableConfig) -> dict[str, Any]:
        ctx = NodeContext(rt, name, config)
        rt.start_node(name)
        if isinstance(options.input, Mapping):
            task: Any = {var: read_path(state, str(src)) for var, src in options.input.items()}
            task = {k: v for k, v in task.items() if v is not None}
        else:
            task = read_path(state, options.input)
            if task is None:
                raise NodeFailed(name, "error", f"the state has no {options.input!r} to give the agent")
            task = task if isinstance(task, (str, Mapping)) else str(task)
        runner = agent if not rt.mcp else await _with_mcp_tools(agent, rt, options)
        result = await runner.run(
            task,
            ctx=ToolContext(sandbox=rt.sandbox, budget=rt.budget, events=rt.events, deps=rt.deps),
            budget=rt.budget,
            journal=rt.journal,
            journal_key=f"{ctx.thread_id}:{name}:{ctx.step}",
            on_event=_live_tools(name, rt),
            approver=_pause_for_approval,
        )
        failed = result.failure()  # (reason, error), None when the agent answered
        if failed is not None:
            reason, error = failed
            rt.emit(NodeFailure(node_id=name, reason=reason, error=error))
            # A loop guard set to end the branch fails the node even where failures route (a search prunes it).
            if on_error is None or (result.stop_reason == "loop" and agent.config.loop_guard.action == "end_branch"):
                raise NodeFailed(name, reason, error)
            recorded = NodeError(node=name, reason=reason, error=error, limit=result.limit)
            return {output_key: None, NODE_ERRORS: {name: recorded.model_dump()}}
        output = result.output.model_dump(mode="json") if result.output is not None else None
        rt.emit(NodeEnd(node_id=name, writes=[output_key]))
        update: dict[str, Any] = {output_key: output}
        if on_error is not None:
            update[NODE_ERRORS] = {name: None}  # a success clears an earlier failure of this node
        return update

    return run


def _pause_for_approval(request: dict[str, Any]) -> Any:
    """An agent's approver in a workflow run: pause the run showing the call; it resumes with the answer."""
    from langgraph.types import interrupt

    return interrupt(request)


def _live_tools(name: str, rt: RunHandles) -> Callable[[Any], Any]:
    """The agent's `on_event`: tool calls and results on the run's stream, then `after_tool_call`."""
    last = time.monotonic()

    async def observe(event: Any) -> None:
        nonlocal last
        if event.kind == "step":
            for call in event.tool_calls:
                send(name, "tool.call", tool=call["name"], args=call["arguments"], step=event.step)
            last = time.monotonic()
        elif event.kind == "tool":
            now = time.monotonic()
            send(name, "tool.result", event.text[:RESULT_CHARS], tool=event.tool, ok=event.ok,
                 duration_s=round(now - last, 3), step=event.step)
            last = now
            if rt.after_tool_call is not None:
                await rt.after_tool_call()

    return observe


async def _with_mcp_tools(agent: Any, rt: RunHandles, options: AgentNodeOptions) -> Any:
    """The agent with the run's MCP tools (all servers, or the node's `mcp_servers:`) beside its own tools."""
    from agentflow.agents import Agent

    mcp_tools = await rt.mcp.tools(options.mcp_servers) if rt.mcp else []
    registry = ToolRegistry([*agent.tools, *mcp_tools]) if agent.config.tools else ToolRegistry(mcp_tools)
    return Agent(agent.config, model=agent.model, tools=registry, output_type=options.output_type)


__all__ = ["AgentNodeOptions", "LazyModel", "build_agent_node", "load_shared_model", "node_options", "option_problems"]
