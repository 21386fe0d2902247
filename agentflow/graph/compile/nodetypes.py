"""Registered node types: reusable steps a workflow names with `type:` (e.g. `type: swe.edit`;
docs/concepts/workflows.md).

A node type is one declared object, `NodeType[StateT, DepsT, SettingsT]`: its function
`async run(state: StateT, ctx: NodeContext[DepsT], settings: SettingsT) -> updates` is checked by a type
checker against the `state`, `deps` and `settings` classes declared beside it; the keys it reads and writes
are the fields of its `reads` and `writes` TypedDicts.

Types come from the entry-point group `agentflow.node_types` (agentflow's own packages register there too, so
this layer names nothing above it) and from the modules a workflow names under `node_types:`. A registry is a
value: `default_registry()` builds one per process.
"""

from __future__ import annotations

import importlib
import sys
import typing
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic

from pydantic import BaseModel, ValidationError
from typing_extensions import TypeVar

from agentflow._modules import import_file
from agentflow.config import extra_key_hint
from agentflow.errors import ConfigError, UserError, did_you_mean
from agentflow.tools.context import DepsT

if TYPE_CHECKING:
    from agentflow.graph.define.spec import WorkflowSpec
    from agentflow.graph.run.context import NodeContext

ENTRY_POINT_GROUP = "agentflow.node_types"

StateT = TypeVar("StateT", default=Any)
"""The state a node type's function takes (a TypedDict of the workflow's keys)."""
SettingsT = TypeVar("SettingsT", bound=BaseModel | None, default=Any)
"""The settings a node type's function takes (its pydantic model; None when it takes none)."""

NodeRun = Callable[[StateT, "NodeContext[DepsT]", SettingsT], Awaitable[Mapping[str, Any]]]
"""`async run(state, ctx, settings) -> updates`."""


def _keys(groups: tuple[type, ...]) -> tuple[str, ...]:
    # a TypedDict's annotations hold its bases' keys too, in order
    return tuple(dict.fromkeys(key for group in groups for key in getattr(group, "__annotations__", {})))


@dataclass(frozen=True)
class NodeType(Generic[StateT, DepsT, SettingsT]):
    """One registered node type."""

    name: str
    """Dotted name used in `type:` (`swe.edit`)."""
    run: NodeRun[StateT, DepsT, SettingsT]
    """`async run(state, ctx, settings) -> updates`."""
    settings: type[SettingsT] | None = None
    """Pydantic model of the node's settings (None: it takes none)."""
    reads: tuple[type, ...] = ()
    """The groups of state keys it reads (TypedDicts)."""
    writes: tuple[type, ...] = ()
    """The groups of state keys it writes (TypedDicts)."""
    description: str = ""
    """One line for `agentflow graph types` and `graph show`."""
    needs: str | None = None
    """A run resource set up by the library that provides the type (`repair`); `agentflow run` hands it the run."""
    sandbox: bool = False
    """It runs code in the run's sandbox: `agentflow run` starts one for a workflow using it."""
    state: type[StateT] | None = None
    """The TypedDict of the state its function takes (None: `reads` and `writes` alone type its keys)."""
    deps: type[DepsT] | None = None
    """The class of the run's deps its context carries; the node refuses to start without them."""
    calls: Callable[[SettingsT, Any], int] | None = None
    """Model calls a node is expected to make with its settings and the run's config (a time estimate)."""

    def __post_init__(self) -> None:
        for role, groups in (("reads", self.reads), ("writes", self.writes)):
            bad = [group for group in groups if not typing.is_typeddict(group)] if isinstance(groups, tuple) else [groups]
            if bad:
                raise ConfigError(f"node type {self.name}: its {role} holds {bad[0]!r}, not a TypedDict of state keys "
                                  f"(give a tuple of TypedDicts, () for none)")
        if self.state is None:
            return
        keys = getattr(self.state, "__annotations__", {})  # a TypedDict's: its bases' keys too
        missing = [key for key in (*self.read_keys, *self.write_keys) if key not in keys]
        if missing:
            raise ConfigError(f"node type {self.name}: its state {self.state.__name__} has no key {missing[0]!r}")

    @property
    def read_keys(self) -> tuple[str, ...]:
        return _keys(self.reads)

    @property
    def write_keys(self) -> tuple[str, ...]:
        return _keys(self.writes)

    def key_types(self) -> dict[str, Any]:
        """The type of each key it reads or writes, as its `state` (else its `reads` and `writes`) types it."""
        sources = [self.state] if self.state is not None else [*self.reads, *self.writes]
        out: dict[str, Any] = {}
        for source in sources:
            try:
                out |= typing.get_type_hints(source)
            except NameError as exc:
                raise ConfigError(f"node type {self.name}: the types of its state {source.__name__} do not "
                                  f"resolve ({exc})") from None
        return out

    def require_deps(self, deps: object, node: str) -> None:
        """A UserError unless the run's `deps` are what the type's context carries (`deps`)."""
        if self.deps is not None and not isinstance(deps, self.deps):
            made_by = f"run the workflow with 'agentflow run', which sets up {self.needs!r}" if self.needs else \
                f"give WorkflowRunner(spec, deps=...) a {self.deps.__name__}"
            raise UserError(f"node '{node}' ({self.name}) runs only with the run's {self.deps.__name__} as its deps",
                            hint=made_by)

    def parse_settings(self, values: Mapping[str, Any] | None, where: str) -> SettingsT | None:
        """The node's settings validated, or a ConfigError naming the first bad key."""
        if self.settings is None:
            if values:
                raise ConfigError(f"{where}: node type {self.name} takes no settings (got {', '.join(values)})")
            return None
        model = typing.cast("type[BaseModel]", self.settings)
        try:
            return typing.cast("SettingsT", model.model_validate(dict(values or {})))
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
            known = ", ".join(sorted(model.model_fields))
            raise ConfigError(f"{where}: settings.{loc}: {err['msg']}{extra_key_hint(model, err)} "
                              f"(settings of {self.name}: {known})") from None

    def expected_calls(self, values: Mapping[str, Any] | None, run: Any = None) -> int:
        """Model calls a node with the settings `values` is expected to make in a run of config `run`."""
        if self.calls is None:
            return 0
        return self.calls(typing.cast("SettingsT", self.parse_settings(values, f"node type {self.name}")), run)


AnyNodeType = NodeType[Any, Any, Any]
"""A node type of any state, deps and settings (what a registry holds)."""


@dataclass
class NodeTypeRegistry:
    """Node types by name."""

    types: dict[str, AnyNodeType] = field(default_factory=dict)

    def register(self, node_type: AnyNodeType, *, replace: bool = False) -> None:
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

    def get(self, name: str) -> AnyNodeType | None:
        return self.types.get(name)

    def require(self, name: str, where: str) -> AnyNodeType:
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
    """The modules of the entry-point group, agentflow's own first (a plugin may replace one of its types)."""
    from importlib.metadata import entry_points

    out = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: (getattr(ep.dist, "name", "") != "agentflow", ep.name)):
        try:
            out.append(ep.load())
        except Exception as exc:  # noqa: BLE001 - a broken plugin is named, not fatal to the rest
            raise UserError(f"node types from entry point {ep.name!r} ({ep.value}) failed to load: {exc}") from None
    return out


@lru_cache(maxsize=1)
def default_registry() -> NodeTypeRegistry:
    """The node types of the entry-point group (agentflow's own and installed plugins'), built once per process."""
    registry = NodeTypeRegistry()
    for module in _entry_point_modules():
        registry.add_module(module, replace=True)
    return registry


def workflow_registry(spec: WorkflowSpec, registry: NodeTypeRegistry | None = None) -> NodeTypeRegistry:
    """`registry` (default: shipped and installed types) plus those of `spec`'s `node_types:` (imported)."""
    registry = registry if registry is not None else default_registry()
    if spec.node_types:
        base = Path(spec.source_path).parent if spec.source_path else None
        registry = registry.with_modules(spec.node_types, base)
    return registry


def typed_keys(spec: WorkflowSpec, registry: NodeTypeRegistry) -> dict[str, Any]:
    """The state keys a workflow's own typed nodes (not its subgraphs') read and write, with their types."""
    keys: dict[str, Any] = {}
    for node in spec.nodes.values():
        node_type = registry.get(node.type) if node.type else None
        types = node_type.key_types() if node_type else {}
        for key in (*node_type.read_keys, *node_type.write_keys) if node_type else ():
            keys.setdefault(key, types.get(key, Any))
    return keys


def typed_nodes(spec: WorkflowSpec, registry: NodeTypeRegistry) -> Iterator[AnyNodeType]:
    """The registered types of a workflow's typed nodes, its subgraphs' (a search node's branches) included."""
    for node in spec.nodes.values():
        node_type = registry.get(node.type) if node.type else None
        if node_type is not None:
            yield node_type
        if node.subgraph is not None and hasattr(node.subgraph, "nodes"):
            yield from typed_nodes(node.subgraph, registry)


def needed_resources(spec: WorkflowSpec, registry: NodeTypeRegistry) -> set[str]:
    """What a workflow's typed nodes need set up as the run's deps (`NodeType.needs`), its subgraphs' included."""
    return {t.needs for t in typed_nodes(spec, registry) if t.needs}


def deps_conflict(spec: WorkflowSpec, registry: NodeTypeRegistry) -> str | None:
    """Why a workflow's typed nodes cannot share one run (deps of unrelated classes); None when they can."""
    first: dict[type, str] = {}
    for node_type in typed_nodes(spec, registry):
        if node_type.deps is not None:
            first.setdefault(node_type.deps, node_type.name)
    for deps, name in first.items():
        for other, other_name in first.items():
            if not issubclass(deps, other) and not issubclass(other, deps):
                return (f"node types {name} and {other_name} need different deps ({deps.__name__}, "
                        f"{other.__name__}): one run has one")
    return None


__all__ = ["ENTRY_POINT_GROUP", "AnyNodeType", "NodeRun", "NodeType", "NodeTypeRegistry", "default_registry",
           "deps_conflict", "needed_resources", "typed_keys", "typed_nodes", "workflow_registry"]
