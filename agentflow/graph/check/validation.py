"""Check a WorkflowSpec before it runs, with networkx. Every problem is one line naming the node(s) and the fix.
The Python a workflow names is read, not run, unless `import_code=True` (`static_code.py`).
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import networkx as nx

from agentflow.errors import UserError, did_you_mean
from agentflow.graph.check.static_code import (
    UNCHECKED,
    CodeCheck,
    StaticRegistry,
    UncheckedType,
    workflow_folder,
)
from agentflow.graph.compile.nodetypes import NodeTypeRegistry, deps_conflict
from agentflow.graph.define.conditions import condition_fields, parse_condition
from agentflow.graph.define.spec import END, START, NodeSpec, RouteSpec, WorkflowSpec, flow_edges, is_end
from agentflow.graph.run.outcome import NODE_ERRORS
from agentflow.graph.search.settings import parse_search_settings, settings_problems
from agentflow.graph.search.tree import branch_spec


@dataclass(frozen=True)
class Problem:
    kind: str  # unknown-node, unreachable, no-path-to-end, bad-node, unknown-field, bad-import...
    message: str

    def __str__(self) -> str:
        return self.message


def to_networkx(spec: WorkflowSpec) -> nx.DiGraph:
    """The control-flow graph: START and END plus every node; edge attribute `kind` is edge|route|parallel|join."""
    g = nx.DiGraph()
    g.add_nodes_from([START, END, *spec.nodes])
    first = spec.first_node()
    if first is not None:
        g.add_edge(START, first, kind="edge")

    for a, b, kind, _ in flow_edges(spec, on_error=True):
        g.add_edge(END if is_end(a) else a, END if is_end(b) else b, kind=kind)
    return g


def validate(
    spec: WorkflowSpec,
    *,
    prefix: str = "",
    registry: NodeTypeRegistry | None = None,
    import_code: bool = False,
    notes: list[str] | None = None,
) -> list[Problem]:
    """All problems of `spec` (and its subgraphs), empty when it is sound. Typed nodes are checked against
    `registry` (default: shipped, installed and `node_types:`). The workflow's Python is read, not imported,
    unless `import_code`; `notes` gets one line per thing only an import could check."""
    code = CodeCheck(workflow_folder(spec), import_code=import_code, notes=notes if notes is not None else [])
    return _validate(spec, prefix, registry, code)


@dataclass
class _Check:
    """One workflow's check under way: its problems so far, and the lookups every part of the check shares."""

    spec: WorkflowSpec
    where: str  # the workflow's name as each message starts (a subgraph's with its path)
    code: CodeCheck
    keys: set[str] | None = None  # the declared state keys, None when they cannot be known
    problems: list[Problem] = dataclasses.field(default_factory=list)

    def add(self, kind: str, msg: str) -> None:
        self.problems.append(Problem(kind, self.where + msg))

    def node_ref(self, name: str, context: str) -> bool:
        """Whether `name` is a node or END (else a problem naming `context` and the nearest node)."""
        if is_end(name) or name in self.spec.nodes:
            return True
        fix = did_you_mean(name, [*self.spec.nodes, END]) or "; define it under nodes: or fix the name"
        self.add("unknown-node", f"{context} refers to unknown node '{name}'{fix}")
        return False

    def undeclared(self, key: str, use: str = "") -> str:
        """'' for a declared key, else the key (and where the workflow names it) and the fix."""
        if self.keys is None or key in self.keys:
            return ""
        near, declare = did_you_mean(key, self.keys), _declare_fix(self.spec)
        fix = f"{near} (or {declare})" if near else f"; {declare} or fix the name"
        return f"'{key}'{f' ({use})' if use else ''}, which the state does not declare{fix}"


def _check_function_model(check: _Check) -> None:
    """`model: function:FILE.py:NAME` names a function that is there, as a node's `fn:` must."""
    model = check.spec.model
    if isinstance(model, str) and model.strip().startswith("function:"):
        target = model.strip().removeprefix("function:").strip()
        if bad := check.code.callable_problem(target, "model", check.where):
            check.add("bad-import", f"model: {bad}")


def _validate(spec: WorkflowSpec, prefix: str, registry: NodeTypeRegistry | None, code: CodeCheck) -> list[Problem]:
    check = _Check(spec, f"{prefix}{spec.name}: " if prefix or spec.name else "", code)
    if not spec.nodes:
        check.add("bad-node", "the workflow has no nodes; add at least one under nodes:")
        return check.problems
    if registry is None and any(node.type for node in spec.nodes.values()):
        try:
            registry = code.registry(spec)
        except UserError as exc:
            check.add("bad-import", str(exc) if str(exc).startswith("node_types:") else f"node_types: {exc}")
    check.keys = _checked_keys(spec, registry, check.where, code)
    _check_references(check)
    for pack in spec.tools:
        if bad := code.pack_problem(pack, check.where):
            check.add("bad-option", f"tools: {bad}")
    _check_function_model(check)
    if conflict := deps_conflict(spec, registry) if registry is not None and not prefix else None:
        check.add("deps-conflict", f"{conflict}; use node types of one library in a workflow")
    for name, node in spec.nodes.items():
        _check_node(check, name, node, registry)
    _check_flow(check)
    _check_parallel_writes(check)
    return check.problems


def _check_references(check: _Check) -> None:
    """Every node an edge, route, parallel block or interrupt names exists; routes are well formed."""
    spec = check.spec
    if spec.start is not None:
        check.node_ref(spec.start, "start")
    for a, b in spec.edges:
        check.node_ref(a, f"edge {a} -> {b}")
        check.node_ref(b, f"edge {a} -> {b}")
    for r in spec.routes:
        _check_route(check, r)
    for p in spec.parallel:
        check.node_ref(p.source, f"parallel from '{p.source}'")
        for b in p.branches:
            check.node_ref(b, f"parallel from '{p.source}' branch")
        check.node_ref(p.join, f"parallel from '{p.source}' join")
    for name in spec.interrupt_before:
        check.node_ref(name, "interrupt_before")


def _check_route(check: _Check, r: RouteSpec) -> None:
    """A route's targets exist, it can choose (on:, or when: with a default), its conditions parse and read
    declared keys, and its `on:` is a declared key or an importable function."""
    check.node_ref(r.source, f"route from '{r.source}'")
    for case, target in r.cases.items():
        check.node_ref(target, f"route from '{r.source}' case '{case}'")
    if r.default:
        check.node_ref(r.default, f"route from '{r.source}' default")
    if r.on is None and not r.when:
        check.add("bad-route", f"route from '{r.source}' has neither on: nor when:; add one of them")
    elif r.on is None and r.default is None:
        check.add("bad-route", f"route from '{r.source}' has only when: conditions; add a default: for when none holds")
    for cond, target in r.when.items():
        check.node_ref(target, f"route from '{r.source}' condition {cond!r}")
        try:
            fields = condition_fields(parse_condition(cond))
        except UserError as exc:
            check.add("bad-route", f"route from '{r.source}': {exc}; fix the condition")
            continue
        for key in sorted(fields):
            if check.undeclared(key):
                check.add("unknown-field", f"route from '{r.source}' condition {cond!r} reads {check.undeclared(key)}")
    if isinstance(r.on, str) and ":" in r.on:
        if bad := check.code.callable_problem(r.on, f"route from '{r.source}'", check.where, ctx_ok=False):
            check.add("bad-import", f"route from '{r.source}': {bad}; fix the import path (pkg.module:function)")
    elif isinstance(r.on, str) and check.undeclared(r.on):
        check.add("unknown-field", f"route from '{r.source}' is on state field {check.undeclared(r.on)}")


def _check_node(check: _Check, name: str, node: NodeSpec, registry: NodeTypeRegistry | None) -> None:
    """One node: its kind, settings, function, MCP servers, search, state keys, subgraph and options."""
    spec, where = check.spec, check.where
    kinds = [k for k in ("type", "fn", "agent", "tool", "interrupt", "subgraph") if getattr(node, k) is not None]
    if len(kinds) != 1:
        what = "none" if not kinds else " and ".join(kinds)
        check.add("bad-node",
                  f"node '{name}' must have exactly one of fn, agent, tool, interrupt, subgraph, type (has {what})")
    if node.type and registry is not None:
        check.problems.extend(_typed_problems(name, node.type, node.settings, registry, where, check.code))
    elif node.settings and not node.type:
        check.add("bad-node", f"node '{name}' has settings but no type; settings: belong to typed nodes")
    if bad := check.code.callable_problem(node.fn, f"node '{name}'", where):
        check.add("bad-import", f"node '{name}': {bad}; fix the import path (pkg.module:function)")
    servers = node.args.get("mcp_servers") if node.agent is not None else None
    if servers is not None:
        declared = [s.name for s in spec.mcp_servers]
        unknown = [str(s) for s in servers if not isinstance(servers, list) or s not in declared]
        if unknown:
            near = did_you_mean(unknown[0], declared) if len(unknown) == 1 else ""
            check.add("unknown-mcp-server",
                      f"node '{name}' names MCP server(s) {', '.join(unknown)}, which the workflow does not "
                      f"declare{near}; declared: {', '.join(declared) or 'none'} (add them under mcp_servers:)")
    if node.search is not None:
        check.problems.extend(Problem("bad-search", where + msg) for msg in _search_problems(name, node, spec))
    for key, verb, use in state_refs(name, node):
        if check.undeclared(key):
            check.add("unknown-field", f"node '{name}' {verb} {check.undeclared(key, use)}")
    if isinstance(node.subgraph, WorkflowSpec):
        sub = node.subgraph
        if node.search is not None:
            sub = branch_spec(spec, node)  # a branch runs over the workflow's state
        check.problems.extend(_validate(sub, f"{where}node '{name}' > ", registry, check.code))
    options = node_option_problems(name, node, spec, check.code)
    check.problems.extend(Problem("bad-option", where + msg) for msg in options)


def _check_flow(check: _Check) -> None:
    """Every node reachable from the start and able to reach END, and every loop with an exit."""
    spec = check.spec
    g = to_networkx(spec)
    g.remove_nodes_from([n for n in list(g) if n not in spec.nodes and n not in (START, END)])
    reachable = nx.descendants(g, START) if spec.first_node() in spec.nodes else set()
    for name in spec.nodes:
        if name not in reachable:
            check.add("unreachable", f"node '{name}' is unreachable from the start node '{spec.first_node()}'; "
                                     f"add an edge into it or remove it")
    can_end = nx.ancestors(g, END)
    stuck = [n for n in spec.nodes if n in reachable and n not in can_end]
    if stuck:
        # Report where the flow gets stuck (dead ends and closed loops), not every node upstream of them.
        dag = nx.condensation(g.subgraph(stuck))
        for comp in dag.nodes:
            if dag.out_degree(comp):
                continue
            members = sorted(dag.nodes[comp]["members"])
            what = f"node '{members[0]}'" if len(members) == 1 else f"nodes {', '.join(members)} (a closed loop)"
            check.add("no-path-to-end", f"{what} has no path to END; add an edge or route case from it to END")
    if spec.step_limit is None:
        _check_loops_exit(check, g)


def _check_loops_exit(check: _Check, g: nx.DiGraph) -> None:
    """Each loop of the flow has a route out of it (without a step limit nothing else would end it)."""
    route_sources = {r.source for r in check.spec.routes}
    for scc in nx.strongly_connected_components(g):
        loop = scc if len(scc) > 1 else {n for n in scc if g.has_edge(n, n)}
        if not loop:
            continue
        exits = any(data.get("kind") == "route" and v not in scc
                    for u in scc if u in route_sources for _, v, data in g.out_edges(u, data=True))
        if not exits:
            check.add("endless-cycle", f"cycle through {', '.join(sorted(loop))} has no conditional exit and no "
                                       f"step limit; add a route out of the loop or set step_limit")


def _check_parallel_writes(check: _Check) -> None:
    """Parallel branches do not write one state key without a reducer (the join would keep either)."""
    spec = check.spec
    reducers = {k for k, f in spec.state.items() if f.reducer is not None}
    for p in spec.parallel:
        owner: dict[str, str] = {}
        for b in p.branches:
            branch = spec.nodes.get(b)
            for key in (branch.writes or []) if branch else []:
                if key in reducers:
                    continue
                if key in owner and owner[key] != b:
                    check.add("parallel-write-conflict",
                              f"parallel branches '{owner[key]}' and '{b}' (from '{p.source}') both write state key "
                              f"'{key}' without a reducer; give '{key}' a reducer (e.g. reducer: append) "
                              f"or write different keys")
                owner.setdefault(key, b)


def node_option_problems(name: str, node: NodeSpec, spec: WorkflowSpec, code: CodeCheck | None = None) -> list[str]:
    """Options a node carries but would not use, and bad agent options (tool packs checked by `code`)."""
    problems: list[str] = []
    kind = node.kind()
    if node.on_error is not None:
        if kind != "agent":
            problems.append(f"node '{name}': on_error applies to agent nodes only; remove it")
        elif not (is_end(node.on_error) or node.on_error in spec.nodes):
            near = did_you_mean(node.on_error, [*spec.nodes, END])
            problems.append(f"node '{name}' on_error refers to unknown node '{node.on_error}'{near}; fix the name")
        elif spec.state_class is not None:
            problems.append(f"node '{name}': on_error needs a 'node_errors' key in the Python state class")
    if kind == "agent":
        from agentflow.graph.compile.agent_nodes import option_problems

        code = code or CodeCheck(workflow_folder(spec))
        problems.extend(option_problems(name, node, code.pack_problem))
    elif kind in ("fn", "interrupt", "subgraph") and node.args:
        problems.append(f"node '{name}': args applies to agent and tool nodes only; remove it")
    if node.output is not None and kind not in ("agent", "tool", "search"):
        problems.append(f"node '{name}': output applies to agent, tool and search nodes only; remove it")
    if node.show and kind != "interrupt":
        problems.append(f"node '{name}': show applies to interrupt nodes only; remove it")
    return problems


def _search_problems(name: str, node: NodeSpec, spec: WorkflowSpec) -> list[str]:
    """A search node's settings, its subgraph, and the state paths and nodes the settings name."""
    if not isinstance(node.subgraph, WorkflowSpec):
        return [f"node '{name}' has search: settings but no subgraph: (the workflow its branches run); add one"]
    try:
        settings = parse_search_settings(node.search, f"node '{name}'")
    except UserError as exc:
        return [str(exc)]
    problems = settings_problems(settings, f"node '{name}'")
    sub = node.subgraph
    for step in settings.step_until:
        if step not in sub.nodes:
            problems.append(f"node '{name}': search.step_until names '{step}', which its subgraph does not have "
                            f"(nodes: {', '.join(sub.nodes)})")
    declared = {**spec.state, **sub.state}
    paths = {"value": settings.value, "select_key": settings.select_key, "strategy_key": settings.strategy_key}
    for field, path in paths.items():
        if path and declared and path.split(".")[0] not in declared:
            problems.append(f"node '{name}': search.{field} reads '{path}', whose key the state does not declare; "
                            f"add it under state: or fix the path")
    if settings.select in ("vote", "smallest") and not settings.select_key:
        problems.append(f"node '{name}': search.select {settings.select} needs search.select_key (the state path "
                        f"it {'counts' if settings.select == 'vote' else 'measures'})")
    for field, keys in (("outputs", settings.outputs or ()), ("gather", settings.gather)):
        for key in keys:
            if spec.state and key not in spec.state:
                problems.append(f"node '{name}': search.{field} names '{key}', which the state does not declare")
    if node.output is not None and spec.state and node.output not in spec.state:
        problems.append(f"node '{name}': output '{node.output}' is not a declared state key; declare it (type: dict)")
    return problems


def _typed_problems(name: str, type_name: str, settings: dict[str, Any], registry: NodeTypeRegistry, where: str,
                    code: CodeCheck) -> list[Problem]:
    """What is wrong with node `name` of type `type_name`: an unknown type, settings its type refuses."""
    node_type = registry.get(type_name)
    if node_type is None and isinstance(registry, StaticRegistry) and registry.opaque:
        code.notes.append(f"{where}node '{name}': type '{type_name}' is not shipped and may come from "
                          f"node_types: {', '.join(registry.opaque)}; {UNCHECKED}")
        return []
    if isinstance(node_type, UncheckedType):
        code.notes.append(f"{where}node '{name}': the settings of type {type_name} (from {node_type.module}) "
                          f"are {UNCHECKED}")
        return []
    if node_type is None:
        known = ", ".join(registry.names()) or "(none)"
        near = did_you_mean(type_name, registry.names())
        return [Problem("unknown-type", f"{where}node '{name}' has unknown type '{type_name}'{near}; use one of: {known}")]
    try:
        node_type.parse_settings(settings, f"node '{name}'")
    except UserError as exc:
        return [Problem("bad-settings", f"{where}{exc}")]
    return []


def state_keys(spec: WorkflowSpec, registry: NodeTypeRegistry | None = None) -> set[str] | None:
    """The keys a run of `spec` keeps, as `compile.state_schema` builds them; None when they cannot be known
    (no declared state, or a typed node whose keys are unknown)."""
    if spec.state_class is not None:
        return class_keys(spec.state_class)
    if not spec.state:
        return None
    keys = set(spec.state)
    for node in spec.nodes.values():
        if node.type:
            node_type = registry.get(node.type) if registry is not None else None
            if node_type is None or isinstance(node_type, UncheckedType):
                return None
            keys.update(node_type.read_keys, node_type.write_keys)
    if any(node.on_error for node in spec.nodes.values()):
        keys.add(NODE_ERRORS)
    return keys


def class_keys(state_class: Any) -> set[str]:
    """The fields of a Python state schema: a pydantic model's, else a TypedDict's (or dataclass's) annotations."""
    fields = getattr(state_class, "model_fields", None)
    if isinstance(fields, dict):
        return set(fields)
    try:
        return set(typing.get_type_hints(state_class))
    except Exception:  # noqa: BLE001 - an unresolvable forward reference still names its key
        return set(getattr(state_class, "__annotations__", {}))


def _checked_keys(spec: WorkflowSpec, registry: NodeTypeRegistry | None, where: str, code: CodeCheck) -> set[str] | None:
    """`state_keys`, with a note when typed nodes read from text leave the state keys unchecked."""
    keys = state_keys(spec, registry)
    if keys is None and spec.state and registry is not None:
        types = {n.type for n in spec.nodes.values() if n.type}
        opaque = bool(getattr(registry, "opaque", None))  # an unknown type may come from a module read, not imported
        unchecked = sorted(t for t in types if isinstance(registry.get(t), UncheckedType) or (opaque and not registry.get(t)))
        if unchecked:
            code.notes.append(f"{where}the state keys nodes read and write (type {', '.join(unchecked)} may add "
                              f"some) are {UNCHECKED}")
    return keys


def _declare_fix(spec: WorkflowSpec) -> str:
    if spec.state_class is not None:
        return f"add it to the state class {getattr(spec.state_class, '__name__', '')}".rstrip()
    return "declare it under state:"


def state_refs(name: str, node: NodeSpec) -> list[tuple[str, str, str]]:
    """(state key, verb, where) for every key `node` names (inputs, outputs, `show`, `writes:`), first use only."""
    refs: list[tuple[str, str, str]] = []
    kind = node.kind()
    if kind == "agent":
        given = node.args.get("input", "task")
        if isinstance(given, str):
            where = "args.input" if "input" in node.args else "its task: args.input defaults to 'task'"
            refs.append((given.split(".")[0], "reads", where))
        elif isinstance(given, dict):
            refs.extend((str(src).split(".")[0], "reads", f"args.input.{var}") for var, src in given.items()
                        if isinstance(src, str))
    elif kind == "tool":
        refs.extend((key, "reads", f"args.{at}") for at, key in _template_keys(node.args))
    elif kind == "type" and isinstance(node.settings.get("input"), str):
        refs.append((node.settings["input"].split(".")[0], "reads", "settings.input"))
    elif kind == "interrupt":
        refs.extend((key, "shows", "show:") for key in node.show)
    if kind in ("agent", "tool"):
        where = "output:" if node.output is not None else "output: defaults to the node's name"
        refs.append((node.output or name, "writes its result to", where))
    if kind != "subgraph":  # a subgraph's keys that this workflow does not declare stay inside it
        refs.extend((key, "writes", "writes:") for key in node.writes or [])
    first: dict[str, tuple[str, str, str]] = {}
    for ref in refs:
        first.setdefault(ref[0], ref)
    return list(first.values())


def _template_keys(value: Any, at: str = "") -> list[tuple[str, str]]:
    """(where, key) of every `{key}` a tool node's arguments fill from the state (see `compile._fill`)."""
    if isinstance(value, str):
        return [(at, key) for key in re.findall(r"\{(\w+)\}", value)]
    if isinstance(value, dict):
        return [ref for k, v in value.items() for ref in _template_keys(v, f"{at}.{k}" if at else str(k))]
    if isinstance(value, list):
        return [ref for i, v in enumerate(value) for ref in _template_keys(v, f"{at}.{i}")]
    return []


def check_input(spec: WorkflowSpec, given: Iterable[str], what: str, registry: Callable[[], NodeTypeRegistry] | None = None) -> None:
    """A UserError when `given` (input or edit keys) sets a key the state does not declare (LangGraph would drop
    it silently); `registry` is called only when typed nodes could declare the key."""
    names = list(given)
    plain = class_keys(spec.state_class) if spec.state_class is not None else set(spec.state)
    if not (spec.state or spec.state_class is not None) or set(names) <= plain:
        return
    keys = state_keys(spec, registry() if registry is not None else None)
    unknown = [k for k in names if keys is not None and k not in keys]
    if unknown:
        raise UserError(
            f"{what} {', '.join(repr(k) for k in unknown)}, which workflow '{spec.name}' does not declare"
            f"{did_you_mean(unknown[0], keys or ())}",
            hint=f"state keys: {', '.join(sorted(keys or ()))}",
        )


def check_workflow(spec: WorkflowSpec, registry: NodeTypeRegistry | None = None) -> None:
    """A one-line UserError for the first problem (counting the rest); imports the workflow's code, as a run does."""
    problems = validate(spec, registry=registry, import_code=True)
    if problems:
        more = f" (and {len(problems) - 1} more; run 'agentflow graph validate')" if len(problems) > 1 else ""
        raise UserError(problems[0].message + more)
