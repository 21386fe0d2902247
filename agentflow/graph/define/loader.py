"""Load a workflow from YAML into a WorkflowSpec, and resolve `pkg.mod:func` import paths.

YAML shape (see workflows/README.md):

    name: counter
    state: {count: {type: int, default: 0}, log: {type: list, reducer: append}}
    nodes:
      step: {fn: "pkg.mod:step", writes: [count, log], route: {on: status, cases: {done: END, more: step}}}
    edges: ["a -> b", [b, c]]

A node may also carry `next: other` (an edge) and `parallel: {branches: [a, b], join: j}`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

from agentflow._modules import import_object
from agentflow.config import read_yaml, validate_config
from agentflow.errors import ConfigError, UserError
from agentflow.graph.define.spec import ParallelSpec, RouteSpec, WorkflowSpec
from agentflow.graph.define.user_code import localize
from agentflow.resources import data_dir


def find_workflow(name_or_path: str | Path) -> Path:
    """A path to a YAML file, or the name of a workflow shipped in `workflows/`."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    shipped = data_dir("workflows")
    for candidate in (shipped / f"{name_or_path}.yaml", shipped / f"{name_or_path}.yml", shipped / str(name_or_path)):
        if candidate.is_file():
            return candidate
    names = sorted(p.stem for p in shipped.glob("*.y*ml")) if shipped.is_dir() else []
    raise UserError(f"workflow {str(name_or_path)!r} not found",
                    hint=f"give a YAML path or one of: {', '.join(names) or '(none shipped)'}")


def load_workflow(name_or_path: str | Path) -> WorkflowSpec:
    """Read and check the shape of a YAML workflow (graph problems are found by `validate`)."""
    path = find_workflow(name_or_path)
    data = read_yaml(path)
    spec = spec_from_dict(data, source=str(path))
    localize(spec, path.parent)  # every path in it is relative to its folder (fn:/tools: need no PYTHONPATH)
    return spec


def spec_from_dict(data: Any, *, source: str = "workflow") -> WorkflowSpec:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping with name, state, nodes, edges")
    data = dict(data)
    if "nodes" not in data:
        raise ConfigError(f"{source}: not a graph workflow (it has no 'nodes:' section)", hint="add nodes:")
    data.setdefault("name", Path(source).stem)
    nodes_in = data.get("nodes") or {}
    if not isinstance(nodes_in, Mapping):
        raise ConfigError(f"{source}: nodes: expected a mapping of node name -> node")
    edges = [_edge(e, source) for e in (data.get("edges") or [])]
    routes: list[dict[Any, Any]] = list(data.get("routes") or [])
    parallel: list[dict[str, Any]] = list(data.get("parallel") or [])
    nodes: dict[str, Any] = {}
    for name, node in nodes_in.items():
        node = dict(node or {}) if isinstance(node, Mapping) else node
        if not isinstance(node, dict):
            raise ConfigError(f"{source}: nodes.{name}: expected a mapping (e.g. {{fn: 'pkg.mod:func'}})")
        if "next" in node:
            edges.append((str(name), str(node.pop("next"))))
        for key, into, shape in (("route", routes, "{on: FIELD, cases: {VALUE: NODE}}"),
                                 ("parallel", parallel, "{branches: [A, B], join: J}")):
            if key in node:
                value = node.pop(key)
                if not isinstance(value, Mapping):
                    raise ConfigError(f"{source}: nodes.{name}.{key}: expected {shape}")
                into.append({"source": name, **value})
        nodes[str(name)] = node
    for i, route in enumerate(routes):
        if not isinstance(route, Mapping):
            raise ConfigError(f"{source}: routes.{i}: expected {{source: NODE, on: FIELD, cases: {{VALUE: NODE}}}}")
        route = routes[i] = dict(route)
        if True in route and "on" not in route:  # YAML 1.1 reads a bare `on:` key as the boolean true
            route["on"] = route.pop(True)
        if isinstance(route.get("cases"), Mapping):
            route["cases"] = {str(k): str(v) for k, v in route["cases"].items()}
    servers = data.get("mcp_servers")
    if isinstance(servers, Mapping):  # {name: {command: ...}} is the same as [{name: name, command: ...}]
        data["mcp_servers"] = [
            {"name": str(k), **(v if isinstance(v, Mapping) else {"command": v})} for k, v in servers.items()
        ]
    data.update(nodes=nodes, edges=edges, routes=routes, parallel=parallel, source_path=source)
    spec = validate_config(WorkflowSpec, data, source=source)
    base = Path(source).parent
    for name, node in spec.nodes.items():
        if isinstance(node.subgraph, str):
            node.subgraph = load_workflow(_subgraph_source(base, node.subgraph))
        elif isinstance(node.subgraph, Mapping):
            node.subgraph = spec_from_dict(node.subgraph, source=f"{source}: nodes.{name}.subgraph")
    return spec


def _subgraph_source(base: Path, name: str) -> str | Path:
    """A `subgraph:` file path relative to the workflow's folder `base`, or the name of a shipped workflow."""
    path = Path(name).expanduser()
    if path.is_absolute() or (base / path).is_file() or "/" in name or path.suffix in (".yaml", ".yml"):
        return path if path.is_absolute() else base / path
    return name


def _edge(item: Any, source: str) -> tuple[str, str]:
    if isinstance(item, str) and "->" in item:
        a, _, b = item.partition("->")
        return a.strip(), b.strip()
    if isinstance(item, (list, tuple)) and len(item) == 2:
        return str(item[0]), str(item[1])
    if isinstance(item, Mapping) and len(item) == 1:
        ((a, b),) = item.items()
        return str(a), str(b)
    raise ConfigError(f"{source}: edges: bad edge {item!r}; write 'a -> b' or [a, b]")


def resolve_callable(value: Any, what: str) -> Callable[..., Any]:
    obj = import_object(value) if isinstance(value, str) else value
    if not callable(obj):
        raise UserError(f"{what}: {value!r} is not callable")
    return cast("Callable[..., Any]", obj)


__all__ = ["ParallelSpec", "RouteSpec", "find_workflow", "load_workflow", "spec_from_dict"]
