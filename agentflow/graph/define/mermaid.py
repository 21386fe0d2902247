"""Render a WorkflowSpec as a Mermaid flowchart (`agentflow graph show`)."""

from __future__ import annotations

import re

from agentflow.graph.define.spec import NodeSpec, WorkflowSpec, is_end

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

    def ref(name: str) -> str:
        return "__end__" if is_end(name) else _id(name)

    if spec.first_node():
        lines.append(f"    __start__ --> {ref(spec.first_node() or '')}")
    for a, b in spec.edges:
        lines.append(f"    {ref(a)} --> {ref(b)}")
    for r in spec.routes:
        on = r.on if isinstance(r.on, str) else getattr(r.on, "__name__", "route")
        for cond, target in r.when.items():
            label = cond.replace('"', "'")
            lines.append(f'    {ref(r.source)} -. "{label}" .-> {ref(target)}')
        for case, target in r.cases.items():
            lines.append(f'    {ref(r.source)} -. "{on}={case}" .-> {ref(target)}')
        if r.default:
            lines.append(f'    {ref(r.source)} -. "default" .-> {ref(r.default)}')
    for p in spec.parallel:
        for b in p.branches:
            lines.append(f"    {ref(p.source)} ==> {ref(b)}")
            lines.append(f"    {ref(b)} ==> {ref(p.join)}")
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

    edges: list[tuple[str, str, str]] = [(ref(a), ref(b), "") for a, b in spec.edges]
    for r in spec.routes:
        on = r.on if isinstance(r.on, str) else getattr(r.on, "__name__", "route")
        edges += [(ref(r.source), ref(t), cond) for cond, t in r.when.items()]
        edges += [(ref(r.source), ref(t), f"{on}={case}") for case, t in r.cases.items()]
        if r.default:
            edges.append((ref(r.source), ref(r.default), "default"))
    for p in spec.parallel:
        for b in p.branches:
            edges += [(ref(p.source), ref(b), "parallel"), (ref(b), ref(p.join), "")]
    return {
        "start": spec.first_node(),
        "nodes": [{"name": name, "kind": node.kind()} for name, node in spec.nodes.items()],
        "edges": [list(e) for e in edges],
        "step_limit": spec.step_limit,
    }
