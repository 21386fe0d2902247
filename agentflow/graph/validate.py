"""Check a WorkflowSpec before it runs, with networkx. Every problem is one line naming the node(s) and the fix.

The Python a workflow names (`fn:`, route `on:`, `tools:`, `node_types:`) is read, not run, unless
`import_code=True` (see `agentflow.graph.static_code`): checking a workflow must not execute it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import networkx as nx

from agentflow.errors import UserError
from agentflow.graph.conditions import condition_fields, parse_condition
from agentflow.graph.spec import END, START, NodeSpec, WorkflowSpec, is_end
from agentflow.graph.static_code import UNCHECKED, CodeCheck, StaticRegistry, UncheckedType, workflow_folder


@dataclass(frozen=True)
class Problem:
    kind: str
    """unknown-node, unreachable, no-path-to-end, endless-cycle, parallel-write-conflict, bad-node, unknown-field,
    bad-import, bad-route"""
    message: str

    def __str__(self) -> str:
        return self.message


def to_networkx(spec: WorkflowSpec) -> nx.DiGraph:
    """The control-flow graph: START and END plus every node; edge attribute `kind` is edge|route|parallel|join."""
    g = nx.DiGraph()
    g.add_node(START)
    g.add_node(END)
    g.add_nodes_from(spec.nodes)
    first = spec.first_node()
    if first is not None:
        g.add_edge(START, first, kind="edge")

    def norm(name: str) -> str:
        return END if is_end(name) else name

    for a, b in spec.edges:
        g.add_edge(norm(a), norm(b), kind="edge")
    for r in spec.routes:
        for target in [*r.when.values(), *r.cases.values(), *([r.default] if r.default else [])]:
            g.add_edge(norm(r.source), norm(target), kind="route")
    for name, node in spec.nodes.items():
        if node.on_error:
            g.add_edge(name, norm(node.on_error), kind="route")
    for p in spec.parallel:
        for b in p.branches:
            g.add_edge(p.source, norm(b), kind="parallel")
            g.add_edge(norm(b), norm(p.join), kind="join")
    return g


def validate(
    spec: WorkflowSpec,
    *,
    prefix: str = "",
    registry: Any = None,
    import_code: bool = False,
    notes: list[str] | None = None,
) -> list[Problem]:
    """All problems of `spec` (and its subgraphs), empty when it is sound. Typed nodes are checked against
    `registry` (default: the shipped and installed node types plus the workflow's `node_types:`).

    The workflow's own Python is read, not imported, unless `import_code` (importing runs it: only for a
    workflow you trust); `notes`, when given, gets one line per thing only an import could check."""
    code = CodeCheck(workflow_folder(spec), import_code=import_code, notes=notes if notes is not None else [])
    return _validate(spec, prefix, registry, code)


def _validate(spec: WorkflowSpec, prefix: str, registry: Any, code: CodeCheck) -> list[Problem]:
    problems: list[Problem] = []
    where = f"{prefix}{spec.name}: " if prefix or spec.name else ""
    known = set(spec.nodes)

    def add(kind: str, msg: str) -> None:
        problems.append(Problem(kind, where + msg))

    if not spec.nodes:
        add("bad-node", "the workflow has no nodes; add at least one under nodes:")
        return problems

    def check(name: str, context: str) -> bool:
        if is_end(name) or name in known:
            return True
        add(
            "unknown-node",
            f"{context} refers to unknown node '{name}'; define it under nodes: or fix the name",
        )
        return False

    if spec.start is not None:
        check(spec.start, "start")
    for a, b in spec.edges:
        check(a, f"edge {a} -> {b}")
        check(b, f"edge {a} -> {b}")
    for r in spec.routes:
        check(r.source, f"route from '{r.source}'")
        for case, target in r.cases.items():
            check(target, f"route from '{r.source}' case '{case}'")
        if r.default:
            check(r.default, f"route from '{r.source}' default")
        if r.on is None and not r.when:
            add("bad-route", f"route from '{r.source}' has neither on: nor when:; add one of them")
        elif r.on is None and r.default is None:
            add(
                "bad-route",
                f"route from '{r.source}' has only when: conditions; add a default: for when none holds",
            )
        for cond, target in r.when.items():
            check(target, f"route from '{r.source}' condition {cond!r}")
            try:
                fields = condition_fields(parse_condition(cond))
            except UserError as exc:
                add("bad-route", f"route from '{r.source}': {exc}; fix the condition")
                continue
            missing = sorted(fields - set(spec.state)) if spec.state else []
            if missing:
                add(
                    "unknown-field",
                    f"route from '{r.source}' condition {cond!r} reads {', '.join(missing)}, which the state "
                    f"does not declare; add it under state: or fix the name",
                )
        if isinstance(r.on, str) and ":" in r.on:
            bad = code.callable_problem(r.on, f"route from '{r.source}'", where, ctx_ok=False)
            if bad:
                add("bad-import", f"route from '{r.source}': {bad}; fix the import path (pkg.module:function)")
        elif isinstance(r.on, str) and spec.state and r.on not in spec.state:
            add(
                "unknown-field",
                f"route from '{r.source}' is on state field '{r.on}', which the state does not declare; "
                f"add it under state: or fix the name",
            )
    for p in spec.parallel:
        check(p.source, f"parallel from '{p.source}'")
        for b in p.branches:
            check(b, f"parallel from '{p.source}' branch")
        check(p.join, f"parallel from '{p.source}' join")
    for name in spec.interrupt_before:
        check(name, "interrupt_before")

    if registry is None and any(node.type for node in spec.nodes.values()):
        try:
            registry = code.registry(spec)
        except UserError as exc:
            add("bad-import", str(exc) if str(exc).startswith("node_types:") else f"node_types: {exc}")
    for pack in spec.tools:
        bad = code.pack_problem(pack, where)
        if bad:
            add("bad-option", f"tools: {bad}")
    for name, node in spec.nodes.items():
        kinds = [k for k in ("type", "fn", "agent", "tool", "interrupt", "subgraph") if getattr(node, k) is not None]
        node_type = registry.get(node.type) if (registry is not None and node.type) else None
        maybe_search = isinstance(node_type, UncheckedType) and not node_type.search_known
        if node_type is not None and (node_type.search or maybe_search):
            kinds = [k for k in kinds if k != "subgraph"]  # a search node's subgraph is its rollout
            if node.subgraph is None and node_type.search:
                add("bad-node", f"node '{name}' ({node.type}) needs a subgraph: the rollout it searches over")
        if len(kinds) != 1:
            what = "none" if not kinds else " and ".join(kinds)
            add(
                "bad-node",
                f"node '{name}' must have exactly one of fn, agent, tool, interrupt, subgraph, type (has {what})",
            )
        if node.type and registry is not None:
            problems.extend(_typed_problems(name, node, registry, where, code))
        elif node.settings and not node.type:
            add("bad-node", f"node '{name}' has settings but no type; settings: belong to typed nodes")
        bad = code.callable_problem(node.fn, f"node '{name}'", where)
        if bad:
            add("bad-import", f"node '{name}': {bad}; fix the import path (pkg.module:function)")
        servers = node.args.get("mcp_servers") if node.agent is not None else None
        if servers is not None:
            declared = [s.name for s in spec.mcp_servers]
            unknown = [str(s) for s in servers] if not isinstance(servers, list) else [
                str(s) for s in servers if s not in declared
            ]
            if unknown:
                add(
                    "unknown-mcp-server",
                    f"node '{name}' names MCP server(s) {', '.join(unknown)}, which the workflow does not "
                    f"declare; declared: {', '.join(declared) or 'none'} (add them under mcp_servers:)",
                )
        if node.search is not None:
            problems.extend(Problem("bad-search", where + msg) for msg in _search_problems(name, node, spec))
        if isinstance(node.subgraph, WorkflowSpec):
            sub = node.subgraph
            if node.search is not None:
                from agentflow.graph.search import branch_spec

                sub = branch_spec(spec, node)  # a branch runs over the workflow's state
            problems.extend(_validate(sub, f"{where}node '{name}' > ", registry, code))
        problems.extend(Problem("bad-option", where + msg) for msg in node_option_problems(name, node, spec, code))

    g = to_networkx(spec)
    g.remove_nodes_from([n for n in list(g) if n not in known and n not in (START, END)])

    reachable = nx.descendants(g, START) if spec.first_node() in known else set()
    for name in spec.nodes:
        if name not in reachable:
            add(
                "unreachable",
                f"node '{name}' is unreachable from the start node '{spec.first_node()}'; "
                f"add an edge into it or remove it",
            )
    can_end = nx.ancestors(g, END)
    stuck = [n for n in spec.nodes if n in reachable and n not in can_end]
    if stuck:
        # Report where the flow gets stuck (dead ends and closed loops), not every node upstream of them.
        dag = nx.condensation(g.subgraph(stuck))
        for comp in dag.nodes:
            if dag.out_degree(comp):
                continue
            members = sorted(dag.nodes[comp]["members"])
            what = (
                f"node '{members[0]}'" if len(members) == 1 else f"nodes {', '.join(members)} (a closed loop)"
            )
            add("no-path-to-end", f"{what} has no path to END; add an edge or route case from it to END")

    if spec.step_limit is None:
        route_sources = {r.source for r in spec.routes}
        for scc in nx.strongly_connected_components(g):
            loop = scc if len(scc) > 1 else {n for n in scc if g.has_edge(n, n)}
            if not loop:
                continue
            exits = any(
                data.get("kind") == "route" and v not in scc
                for u in scc
                if u in route_sources
                for _, v, data in g.out_edges(u, data=True)
            )
            if not exits:
                names = ", ".join(sorted(loop))
                add(
                    "endless-cycle",
                    f"cycle through {names} has no conditional exit and no step limit; "
                    f"add a route out of the loop or set step_limit",
                )

    reducers = {k for k, f in spec.state.items() if f.reducer is not None}
    for p in spec.parallel:
        owner: dict[str, str] = {}
        for b in p.branches:
            branch = spec.nodes.get(b)
            for key in (branch.writes or []) if branch else []:
                if key in reducers:
                    continue
                if key in owner and owner[key] != b:
                    add(
                        "parallel-write-conflict",
                        f"parallel branches '{owner[key]}' and '{b}' (from '{p.source}') both write state key "
                        f"'{key}' without a reducer; give '{key}' a reducer (e.g. reducer: append) "
                        f"or write different keys",
                    )
                owner.setdefault(key, b)
    return problems


def node_option_problems(name: str, node: NodeSpec, spec: WorkflowSpec, code: CodeCheck | None = None) -> list[str]:
    """Options a node carries but would not use, and bad agent options (see agentflow.graph.agent_nodes);
    the tool packs an agent names are checked by `code` (default: read, not imported)."""
    problems: list[str] = []
    kind = node.kind()
    if node.on_error is not None:
        if kind != "agent":
            problems.append(f"node '{name}': on_error applies to agent nodes only; remove it")
        elif not (is_end(node.on_error) or node.on_error in spec.nodes):
            problems.append(f"node '{name}' on_error refers to unknown node '{node.on_error}'; fix the name")
        elif spec.state_class is not None:
            problems.append(f"node '{name}': on_error needs a 'node_errors' key in the Python state class")
    if kind == "agent":
        from agentflow.graph.agent_nodes import option_problems

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
    from agentflow.graph.search import parse_search_settings

    if not isinstance(node.subgraph, WorkflowSpec):
        return [f"node '{name}' has search: settings but no subgraph: (the workflow its branches run); add one"]
    try:
        settings = parse_search_settings(node.search, f"node '{name}'")
    except UserError as exc:
        return [str(exc)]
    problems: list[str] = []
    sub = node.subgraph
    for step in settings.step_until:
        if step not in sub.nodes:
            problems.append(f"node '{name}': search.step_until names '{step}', which its subgraph does not have "
                            f"(nodes: {', '.join(sub.nodes)})")
    declared = {**spec.state, **sub.state}
    paths = {"value": settings.value, "select_key": settings.select_key}
    for field, path in paths.items():
        if path and declared and path.split(".")[0] not in declared:
            problems.append(f"node '{name}': search.{field} reads '{path}', whose key the state does not declare; "
                            f"add it under state: or fix the path")
    if settings.select in ("vote", "smallest") and not settings.select_key:
        problems.append(f"node '{name}': search.select {settings.select} needs search.select_key (the state path "
                        f"it {'counts' if settings.select == 'vote' else 'measures'})")
    for key in settings.outputs or ():
        if spec.state and key not in spec.state:
            problems.append(f"node '{name}': search.outputs names '{key}', which the state does not declare")
    if node.output is not None and spec.state and node.output not in spec.state:
        problems.append(f"node '{name}': output '{node.output}' is not a declared state key; declare it (type: dict)")
    return problems


def _typed_problems(name: str, node: Any, registry: Any, where: str, code: CodeCheck) -> list[Problem]:
    node_type = registry.get(node.type)
    if node_type is None and isinstance(registry, StaticRegistry) and registry.opaque:
        code.notes.append(f"{where}node '{name}': type '{node.type}' is not shipped and may come from "
                          f"node_types: {', '.join(registry.opaque)}; {UNCHECKED}")
        return []
    if isinstance(node_type, UncheckedType):
        code.notes.append(f"{where}node '{name}': the settings of type {node.type} (from {node_type.module}) "
                          f"are {UNCHECKED}")
        return []
    if node_type is None:
        known = ", ".join(registry.names()) or "(none)"
        return [Problem("unknown-type", f"{where}node '{name}' has unknown type '{node.type}'; use one of: {known}")]
    try:
        node_type.parse_settings(node.settings, f"node '{name}'")
    except UserError as exc:
        return [Problem("bad-settings", f"{where}{exc}")]
    return []


def check_workflow(spec: WorkflowSpec, registry: Any = None) -> None:
    """Raise a one-line UserError for the first problem (all of them are counted in the message). For a run:
    it imports the workflow's code (the exact check; the run imports it anyway)."""
    problems = validate(spec, registry=registry, import_code=True)
    if problems:
        more = f" (and {len(problems) - 1} more; run 'agentflow graph validate')" if len(problems) > 1 else ""
        raise UserError(problems[0].message + more)
