"""Render a WorkflowSpec as a Mermaid flowchart (`agentflow graph show`)."""

from __future__ import annotations

import re

from agentflow.graph.define.spec import NodeSpec, WorkflowSpec, flow_edges, is_end

_SHAPES = {"interrupt": ("{{", "}}"), "subgraph": ("[[", "]]"), "agent": ("([", "])"), "tool": ("[/", "/]")}


def _id(name: str) -> str:
    return re.sub(r"\W", "_", name)


def to_mermaid(spec: WorkflowSpec) -> str:
    """`flowchart TD` text: plain arrows for edges, labelled dotted arrows for route cases, thick for parallel.
    Typed nodes show their type; a search node (`search:` over a subgraph) is drawn as a box holding the
    subgraph its branches run."""
    lines = ["flowchart TD", "    __start__([start])", "    __end__([end])"]
    for name, node in spec.nodes.items():
        if node.search is not None and isinstance(node.subgraph, WorkflowSpec):
            lines += _search_box(name, node)
            continue
        left, right = _SHAPES.get(node.kind(), ("[", "]"))
        agent = str(node.agent).rsplit("/", 1)[-1]  # an agent YAML file by its name (the loader made it absolute)
        label = f"{name}: {agent}" if node.kind() == "agent" else f"{name}: {node.type}" if node.type else name
        lines.append(f'    {_id(name)}{left}"{label}"{right}')

    if spec.first_node():
        lines.append(f"    __start__ --> {_id(spec.first_node() or '')}")
    for a, b, kind, label in flow_edges(spec):
        a, b = _id(a), "__end__" if is_end(b) else _id(b)
        quoted = label.replace('"', "'")
        arrow = f'-. "{quoted}" .->' if kind == "route" else "-->" if kind == "edge" else "==>"
        lines.append(f"    {a} {arrow} {b}")
    return "\n".join(lines) + "\n"


def _search_box(name: str, node: NodeSpec) -> list[str]:
    """A search node as a box holding the subgraph its branches run, titled with its `search:` settings."""
    sub = node.subgraph
    given = dict(node.search or {})
    settings = ", ".join(f"{k}={v}" for k, v in given.items())
    strategy = f"by {given['strategy_key']}" if given.get("strategy_key") else given.get("strategy", "best_of_n")
    title = f"{name}: search {strategy}" + (f" ({settings})" if settings else "")
    out = [f'    subgraph {_id(name)}["{title}"]', "        direction LR"]
    prefix = f"{_id(name)}__"
    for child, child_node in sub.nodes.items():
        label = f"{child}: {child_node.type}" if child_node.type else child
        out.append(f'        {prefix}{_id(child)}["{label}"]')
    for a, b in sub.edges:
        if not is_end(b):
            out.append(f"        {prefix}{_id(a)} --> {prefix}{_id(b)}")
    for r in sub.routes:
        for target in {*r.cases.values(), *r.when.values(), *([r.default] if r.default else [])}:
            if not is_end(target):
                out.append(f"        {prefix}{_id(r.source)} -.-> {prefix}{_id(target)}")
    out.append("    end")
    return out


def outline(spec: WorkflowSpec) -> dict[str, object]:
    """Nodes and labelled edges as plain data (the run viewer draws them): `{start, nodes, edges, step_limit}`."""
    def ref(name: str) -> str:
        return "__end__" if is_end(name) else name

    edges = [[ref(a), ref(b), "parallel" if kind == "parallel" else label] for a, b, kind, label in flow_edges(spec)]
    nodes = [{"name": name, "kind": node.kind()} for name, node in spec.nodes.items()]
    return {"start": spec.first_node(), "nodes": nodes, "edges": edges, "step_limit": spec.step_limit}
