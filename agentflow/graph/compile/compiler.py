"""Turn a WorkflowSpec into a LangGraph StateGraph (LangGraph is imported here, never at package import)."""

from __future__ import annotations

import inspect
import operator
import re
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypedDict, cast

from langchain_core.runnables import RunnableConfig

from agentflow.errors import UserError
from agentflow.events.kinds import NodeEnd
from agentflow.graph.check.validation import check_input, check_workflow
from agentflow.graph.compile.nodetypes import (
    AnyNodeType,
    NodeTypeRegistry,
    typed_keys,
    typed_nodes,
    workflow_registry,
)
from agentflow.graph.define.conditions import evaluate, parse_condition
from agentflow.graph.define.loader import resolve_callable
from agentflow.graph.define.spec import NodeSpec, RouteSpec, WorkflowSpec, is_end
from agentflow.graph.run.context import NodeContext, RunHandles
from agentflow.graph.run.outcome import NODE_ERRORS, with_error_exit
from agentflow.graph.run.superstep import settled, settled_sync
from agentflow.graph.search.tree import read_path

_TYPES: dict[str, Any] = {"str": str, "int": int, "float": float, "bool": bool, "list": list, "dict": dict}


def _append(left: Any, right: Any) -> list[Any]:
    items: list[Any] = [] if left is None else list(left)
    if right is None:
        return items
    return items + (list(right) if isinstance(right, (list, tuple)) else [right])


def _add(left: Any, right: Any) -> Any:
    if left is None:
        return right
    if right is None:
        return left
    return operator.add(left, right)


def _merge(left: Any, right: Any) -> dict[str, Any]:
    return {**(left or {}), **(right or {})}


_REDUCERS: dict[str, Callable[[Any, Any], Any]] = {"append": _append, "add": _add, "merge": _merge}


def state_schema(spec: WorkflowSpec, registry: NodeTypeRegistry | None = None) -> type:
    """The state schema: the Python state class, or a TypedDict of `state:` and the keys typed nodes use."""
    if spec.state_class is not None:
        return cast(type, spec.state_class)
    fields: dict[str, Any] = {}
    for name, f in spec.state.items():
        tp = _TYPES.get(f.type, Any)
        fields[name] = Annotated[tp, _REDUCERS[f.reducer]] if f.reducer and f.reducer != "replace" else tp
    if registry is not None:
        for key, tp in typed_keys(spec, registry).items():
            fields.setdefault(key, tp)
    if any(n.on_error for n in spec.nodes.values()):
        fields[NODE_ERRORS] = Annotated[dict, _merge]
    if not fields:
        fields["__value"] = Any  # LangGraph needs at least one key
    safe = re.sub(r"\W", "_", spec.name) or "State"
    schema: type = TypedDict(f"{safe}_State", fields, total=False)  # type: ignore[misc]
    return schema


def _wants_ctx(fn: Callable[..., Any]) -> bool:
    try:
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        params = [p for p in inspect.signature(fn).parameters.values() if p.kind in (*positional, p.VAR_POSITIONAL)]
    except (TypeError, ValueError):
        return False
    return len(params) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


def _function_node(name: str, fn: Callable[..., Any], rt: RunHandles) -> Callable[..., Any]:
    wants_ctx = _wants_ctx(fn)
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)
    # a node is wrapped to say when it starts and ends, and to start none past the wall-clock limit
    wrapped = rt.events is not None or rt.budget is not None

    def finish(result: Any) -> Any:
        keys = list(result) if isinstance(result, Mapping) else []
        rt.emit(NodeEnd(node_id=name, writes=keys))
        return result

    def start(state: Any, config: RunnableConfig) -> tuple[Any, ...]:
        """The node starts (`node.start`); the arguments `fn` takes."""
        rt.start_node(name)
        return (state, NodeContext(rt, name, config)) if wants_ctx else (state,)

    if is_async:

        async def run_async(state: Any, config: RunnableConfig) -> Any:
            return finish(await fn(*start(state, config)))

        return run_async

    if not wants_ctx and not wrapped:
        return fn  # nothing to add: the plain function is the node

    def run_sync(state: Any, config: RunnableConfig) -> Any:
        return finish(fn(*start(state, config)))

    return run_sync


def _interrupt_node(name: str, node: NodeSpec, rt: RunHandles) -> Callable[..., Any]:
    def ask(state: Any) -> dict[str, Any]:
        from langgraph.types import interrupt

        rt.start_node(name)
        shown = {key: read_path(state, key) for key in node.show}
        answer = interrupt({"node": name, "message": node.interrupt, "state": shown})
        updates: dict[str, Any] = {}
        if isinstance(answer, Mapping):
            if answer.get("action") == "reject":
                raise UserError(f"run rejected at '{name}'" + (f": {answer['reason']}" if answer.get("reason") else ""))
            if answer.get("action") == "edit":
                updates = dict(answer.get("updates") or {})
        rt.emit(NodeEnd(node_id=name, writes=list(updates), approved=True))
        return updates

    return ask


def _fill(template: Any, state: Any) -> Any:
    if isinstance(template, str):
        match = re.fullmatch(r"\{(\w+)\}", template)
        if match:
            return read_path(state, match.group(1))
        return re.sub(r"\{(\w+)\}", lambda m: str(read_path(state, m.group(1))), template)
    if isinstance(template, dict):
        return {k: _fill(v, state) for k, v in template.items()}
    if isinstance(template, list):
        return [_fill(v, state) for v in template]
    return template


def _tool_node(name: str, node: NodeSpec, rt: RunHandles) -> Callable[..., Any]:
    output = node.output or name

    async def call(state: Any, config: RunnableConfig) -> dict[str, Any]:
        rt.start_node(name)
        result = await NodeContext(rt, name, config).call_tool(node.tool or "", _fill(node.args, state))
        if not result.ok:
            raise UserError(f"tool node '{name}': {result.text}")
        value = result.data if result.data else result.text
        rt.emit(NodeEnd(node_id=name, writes=[output]))
        return {output: value}

    return call


def registry_for(spec: WorkflowSpec, rt: RunHandles | None = None) -> NodeTypeRegistry:
    """The node types a workflow can use: the run's registry (default: shipped and installed) plus `node_types:`."""
    return workflow_registry(spec, rt.node_types if rt is not None else None)


def _typed_node(name: str, node: NodeSpec, rt: RunHandles, node_type: AnyNodeType) -> Callable[..., Any]:
    settings = node_type.parse_settings(node.settings, f"node '{name}'")

    async def run(state: Any, config: RunnableConfig) -> dict[str, Any]:
        node_type.require_deps(rt.deps, name)
        rt.start_node(name, node_type=node_type.name)
        rt.node_clock.start()
        try:
            updates = dict(await node_type.run(state, NodeContext(rt, name, config, node), settings) or {})
        finally:
            rt.node_clock.stop()
        rt.emit(NodeEnd(node_id=name, type=node_type.name, writes=list(updates)))
        return updates

    return run


def _router(route: RouteSpec, end: str) -> tuple[Callable[[Any], str], dict[str, str]]:
    on = route.on
    pick: Callable[[Any], Any] | None
    if on is None:
        pick = None
    elif isinstance(on, str) and ":" not in on:
        def pick(state: Any) -> Any:
            return read_path(state, on)
    else:
        pick = resolve_callable(on, f"route from '{route.source}'")

    conditions = [(parse_condition(text), target) for text, target in route.when.items()]
    targets = {*route.when.values(), *route.cases.values()} | ({route.default} if route.default else set())
    path_map = {t: (end if is_end(t) else t) for t in targets}
    cases, default = route.cases, route.default

    def choose(state: Any) -> str:
        for tree, when_target in conditions:
            if evaluate(tree, state):
                return when_target
        if pick is None:
            return default or end
        value = pick(state)
        target = cases.get(str(value).lower() if isinstance(value, bool) else str(value))
        if target is None and isinstance(value, bool):
            target = cases.get(str(value))
        if target is None:
            if default is None:
                raise UserError(f"route from '{route.source}': value {value!r} matches no case "
                                f"({', '.join(cases)}); add a case or a default")
            target = default
        return target

    return choose, path_map


def _node_callable(name: str, node: NodeSpec, spec: WorkflowSpec, rt: RunHandles,
                   registry: NodeTypeRegistry | None) -> Any:
    """What LangGraph runs for `node`: a callable, or a compiled subgraph."""
    kind = node.kind()
    if kind == "type" and node.type is not None:
        types = registry if registry is not None else registry_for(spec, rt)
        return _typed_node(name, node, rt, types.require(node.type, f"node '{name}'"))
    if kind == "fn":
        return _function_node(name, resolve_callable(node.fn, f"node '{name}'"), rt)
    if kind == "interrupt":
        return _interrupt_node(name, node, rt)
    if kind == "tool":
        return _tool_node(name, node, rt)
    if kind == "agent":
        from agentflow.graph.compile.agent_nodes import build_agent_node  # agents load only when used

        return build_agent_node(name, node, rt, spec)
    if kind == "subgraph":
        return build_graph(node.subgraph, rt).compile()
    from agentflow.graph.search.engine import search_node

    return search_node(name, node, spec, rt, compile_workflow)


def _settled(node: Any, rt: RunHandles) -> Any:
    """A node raises its failure only once the nodes beside it in its step have ended (`superstep.py`)."""
    if not inspect.isfunction(node):
        return node
    if inspect.iscoroutinefunction(node):
        return settled(rt.supersteps, node)
    return settled_sync(rt.supersteps, node)


def build_graph(spec: WorkflowSpec, rt: RunHandles | None = None) -> Any:
    """The uncompiled LangGraph StateGraph for `spec` (validated first)."""
    from langgraph.graph import END, START, StateGraph

    rt = rt or RunHandles()
    registry = registry_for(spec, rt) if any(n.type for n in spec.nodes.values()) else None
    check_workflow(spec, registry)
    graph: Any = StateGraph(state_schema(spec, registry))
    for name, node in spec.nodes.items():
        graph.add_node(name, _settled(_node_callable(name, node, spec, rt, registry), rt))

    def target(name: str) -> str:
        return END if is_end(name) else name

    graph.add_edge(START, spec.first_node())
    on_error = {name: node.on_error for name, node in spec.nodes.items() if node.on_error}
    for a, b in spec.edges:
        if a in on_error:
            _add_error_exit(graph, a, on_error[a], target(b))
        else:
            graph.add_edge(a, target(b))
    for route in spec.routes:
        choose, path_map = _router(route, END)
        if route.source in on_error:
            _add_error_exit(graph, route.source, on_error[route.source], choose, path_map)
        else:
            graph.add_conditional_edges(route.source, choose, path_map)
    for p in spec.parallel:
        for b in p.branches:
            graph.add_edge(p.source, b)
        graph.add_edge(list(p.branches), target(p.join))
    return graph


def _add_error_exit(graph: Any, source: str, on_error: str, normal: Any, path_map: dict[str, str] | None = None) -> None:
    """Edges out of a node with `on_error:`: to that node after a failure, else as declared."""
    from langgraph.graph import END

    paths = dict(path_map or {normal: normal})
    paths[on_error] = END if is_end(on_error) else on_error
    graph.add_conditional_edges(source, with_error_exit(source, on_error, normal), paths)


def compile_workflow(
    spec: WorkflowSpec, rt: RunHandles | None = None, checkpointer: Any = None, *, interrupt_after: Any = None
) -> Any:
    """A runnable LangGraph graph for `spec` (`interrupt_after`: where a search pauses a branch between steps).
    An agentflow checkpointer is told the types the workflow's state declares: the only ones it loads back."""
    from agentflow.graph.persist.serde import StrictSerde, declared_types

    graph = build_graph(spec, rt)
    if isinstance(getattr(checkpointer, "serde", None), StrictSerde):
        checkpointer.with_allowlist(declared_types(graph, _node_key_types(spec, rt)))
    return graph.compile(checkpointer=checkpointer, interrupt_before=list(spec.interrupt_before) or None,
                         interrupt_after=interrupt_after)


def _node_key_types(spec: WorkflowSpec, rt: RunHandles | None) -> list[Any]:
    """The types the workflow's typed nodes (its subgraphs' too) give the state keys they read and write."""
    return [tp for t in typed_nodes(spec, registry_for(spec, rt)) for tp in t.key_types().values()]


def initial_state(spec: WorkflowSpec, given: Mapping[str, Any], rt: RunHandles | None = None) -> dict[str, Any]:
    """Input for a fresh run: declared defaults, then the given values (an undeclared key is a UserError)."""
    check_input(spec, given, "input sets", lambda: registry_for(spec, rt))
    out = {k: f.default for k, f in spec.state.items() if f.default is not None and spec.state_class is None}
    out.update(given)
    return out


__all__ = ["build_graph", "compile_workflow", "initial_state", "state_schema", "typing"]
