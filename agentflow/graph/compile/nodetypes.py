"""Registered node types: reusable steps a workflow names with `type:` (e.g. `type: swe.edit`).

A node type is an async function `run(state, ctx, settings) -> updates` with a pydantic model of the
settings it takes (a node's `settings:` are validated against it: a typo is a validation problem), the state
keys it reads and writes, and one line of description. (A search is not a node type: a node with `search:`
settings runs its `subgraph:` as the branches, `agentflow.graph.search`.)

Where types come from, in order: the entry-point group `agentflow.node_types` (each entry a module or an
object holding `NODE_TYPES`, a list of `NodeType`) — agentflow's own packages (`agentflow.repair.nodes`, ...)
register there too, in its pyproject.toml, so this layer names nothing above it — and the modules a workflow
names under `node_types:` (`my_pkg.nodes`, or `nodes.py` next to the workflow).
A registry is a value (no global state): `default_registry()` builds one and caches it per process.

Typed, a node type's function is `run(state: MyState, ctx: NodeContext[MyDeps], settings: MySettings)`: the
TypedDict it names as its `state` types its keys in the workflow's state schema (else they are Any), its
context's `deps` are the run's dependencies (`RunContext.deps`: what it `needs`, set up by the library that
provides it), and its settings an instance of its model.
"""

from __future__ import annotations

import importlib
import sys
import typing
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from agentflow._modules import import_file
from agentflow.config import extra_key_hint
from agentflow.errors import ConfigError, UserError, did_you_mean

ENTRY_POINT_GROUP = "agentflow.node_types"

NodeRun = Callable[[Any, Any, Any], Awaitable[Mapping[str, Any]]]


@dataclass(frozen=True)
class NodeType:
    """One registered node type."""

    name: str
    """Dotted name used in `type:` (`swe.edit`)."""
    run: NodeRun
    """`async run(state, ctx, settings) -> updates`; `ctx` is the node's `NodeContext`."""
    settings: type[BaseModel] | None = None
    """Pydantic model of the node's settings (None: it takes none)."""
    reads: tuple[str, ...] = ()
    """State keys it reads."""
    writes: tuple[str, ...] = ()
    """State keys it writes (for parallel-conflict checks and `graph show`)."""
    description: str = ""
    """One line for `agentflow graph types` and `graph show`."""
    needs: str | None = None
    """A run resource the type works with, set up by the library that provides it (`repair`: a task's sandbox,
    models and settings, from `agentflow.repair`); `agentflow run` hands a workflow of such types to it."""
    sandbox: bool = False
    """It runs code in the run's sandbox: `agentflow run` starts one (docker by default) for a workflow using it."""
    state: type | None = None
    """The TypedDict its state keys are fields of (the type of the state it takes): the type of each key it
    reads and writes in the workflow's state schema (None: Any)."""

    def __post_init__(self) -> None:
        keys = getattr(self.state, "__annotations__", None)  # a TypedDict's: its bases' keys too
        missing = [key for key in (*self.reads, *self.writes) if key not in keys] if keys is not None else []
        if self.state is not None and missing:
            raise ConfigError(f"node type {self.name}: its state {self.state.__name__} has no key {missing[0]!r}")

    def key_types(self) -> dict[str, Any]:
        """The type of each key of its `state` (none without one)."""
        if self.state is None:
            return {}
        try:
            return typing.get_type_hints(self.state)
        except NameError as exc:
            raise ConfigError(f"node type {self.name}: the types of its state {self.state.__name__} do not "
                              f"resolve ({exc})") from None

    def parse_settings(self, values: Mapping[str, Any] | None, where: str) -> BaseModel | None:
        """The node's settings validated, or a ConfigError naming the first bad key."""
        if self.settings is None:
            if values:
                raise ConfigError(f"{where}: node type {self.name} takes no settings (got {', '.join(values)})")
            return None
        try:
            return self.settings.model_validate(dict(values or {}))
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
            known = ", ".join(sorted(self.settings.model_fields))
            near = extra_key_hint(self.settings, err)
            raise ConfigError(
                f"{where}: settings.{loc}: {err['msg']}{near} (settings of {self.name}: {known})"
            ) from None


@dataclass
class NodeTypeRegistry:
    """Node types by name."""

    types: dict[str, NodeType] = field(default_factory=dict)

    def register(self, node_type: NodeType, *, replace: bool = False) -> None:
        if node_type.name in self.types and not replace and self.types[node_type.name] is not node_type:
            raise ConfigError(f"node type {node_type.name!r} is registered twice; rename one of them")
        self.types[node_type.name] = node_type

    def add_module(self, module: Any, *, replace: bool = False) -> None:
        """Register every `NodeType` in `module.NODE_TYPES` (or in an iterable of them)."""
        items = getattr(module, "NODE_TYPES", module)
        if isinstance(items, NodeType):
            items = [items]
        if not isinstance(items, Iterable):
            raise ConfigError(f"{module!r} has no NODE_TYPES list")
        for item in items:
            if not isinstance(item, NodeType):
                raise ConfigError(f"{module!r}: NODE_TYPES holds {item!r}, not a NodeType")
            self.register(item, replace=replace)

    def get(self, name: str) -> NodeType | None:
        return self.types.get(name)

    def require(self, name: str, where: str) -> NodeType:
        found = self.types.get(name)
        if found is None:
            known = ", ".join(sorted(self.types)) or "(none)"
            raise ConfigError(f"{where}: unknown node type {name!r}{did_you_mean(name, self.types)} (known: {known})")
        return found

    def names(self) -> list[str]:
        return sorted(self.types)

    def with_modules(self, modules: Iterable[str], base_dir: str | Path | None = None) -> NodeTypeRegistry:
        """A copy with the node types of `modules` (import paths, or .py files relative to `base_dir`)."""
        out = NodeTypeRegistry(dict(self.types))
        for name in modules:
            out.add_module(_import_types_module(name, base_dir), replace=True)
        return out


def _import_types_module(name: str, base_dir: str | Path | None) -> Any:
    path = Path(base_dir or ".") / name if name.endswith(".py") else None
    if path is not None:
        if not path.is_file():
            raise UserError(f"node_types: {path} not found", hint="give a module path or a .py file next to the workflow")
        try:
            return import_file(path.resolve(), f"agentflow_user_code.nodes_{path.stem}")
        except ImportError as exc:
            raise UserError(f"node_types: cannot import {path}: {exc}") from None
    if base_dir is not None and str(base_dir) not in sys.path:
        sys.path.insert(0, str(base_dir))  # modules next to the workflow file are importable by name
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise UserError(f"node_types: cannot import {name!r}: {exc}") from None


def _entry_point_modules() -> list[Any]:
    """The modules registered under the entry-point group, agentflow's own first (a plugin may replace one of
    its types, not the other way round)."""
    from importlib.metadata import entry_points

    out = []
    found = entry_points(group=ENTRY_POINT_GROUP)
    for ep in sorted(found, key=lambda ep: (getattr(ep.dist, "name", "") != "agentflow", ep.name)):
        try:
            out.append(ep.load())
        except Exception as exc:  # noqa: BLE001 - a broken plugin is named, not fatal to the rest
            raise UserError(f"node types from entry point {ep.name!r} ({ep.value}) failed to load: {exc}") from None
    return out


@lru_cache(maxsize=1)
def default_registry() -> NodeTypeRegistry:
    """The node types of the entry-point group — agentflow's own (repair, reasoning, codegen, instruct: declared
    in its pyproject.toml, so the graph layer names nothing above it) and installed plugins' — built once per
    process."""
    registry = NodeTypeRegistry()
    for module in _entry_point_modules():
        registry.add_module(module, replace=True)
    return registry


def workflow_registry(spec: Any, registry: NodeTypeRegistry | None = None) -> NodeTypeRegistry:
    """`registry` (default: shipped and installed types) plus the types of the modules `spec` names under
    `node_types:` (relative to its file). This imports those modules: it runs the workflow's code."""
    registry = registry if registry is not None else default_registry()
    if spec.node_types:
        base = Path(spec.source_path).parent if spec.source_path else None
        registry = registry.with_modules(spec.node_types, base)
    return registry


def typed_keys(spec: Any, registry: NodeTypeRegistry) -> dict[str, Any]:
    """The state keys a workflow's own typed nodes read and write (not its subgraphs'), in order, each once,
    with their types (the node type's `state` says; else Any): part of its state whether or not `state:`
    declares them."""
    keys: dict[str, Any] = {}
    for node in spec.nodes.values():
        node_type = registry.get(node.type) if node.type else None
        types = node_type.key_types() if node_type else {}
        for key in (*node_type.reads, *node_type.writes) if node_type else ():
            keys.setdefault(key, types.get(key, Any))
    return keys


def typed_nodes(spec: Any, registry: NodeTypeRegistry) -> Iterator[NodeType]:
    """The registered types of a workflow's typed nodes, its subgraphs' (a search node's branches) included."""
    for node in spec.nodes.values():
        node_type = registry.get(node.type) if node.type else None
        if node_type is not None:
            yield node_type
        if node.subgraph is not None and hasattr(node.subgraph, "nodes"):
            yield from typed_nodes(node.subgraph, registry)


def needed_resources(spec: Any, registry: NodeTypeRegistry) -> set[str]:
    """What a workflow's typed nodes need set up as the run's deps (`NodeType.needs`), its subgraphs' included."""
    return {t.needs for t in typed_nodes(spec, registry) if t.needs}


__all__ = ["ENTRY_POINT_GROUP", "NodeRun", "NodeType", "NodeTypeRegistry", "default_registry", "needed_resources",
           "typed_keys", "typed_nodes", "workflow_registry"]
