"""How a repair run's settings reach its workflow's nodes. A typed node: the run's (`RepairConfig`, `-c key=value`),
then its own `settings:`, then `-c nodes.<node>.<key>` (`give_settings`). A graph search node: its `search:`
with the run's `concurrency` and `seed` as defaults, `--strategy` over them, `-c nodes.<node>.<key>` last
(`set_graph_searches`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from agentflow.errors import ConfigError, UserError
from agentflow.graph.compile.nodetypes import NodeTypeRegistry
from agentflow.graph.define.spec import NodeSpec, WorkflowSpec
from agentflow.graph.search.settings import SearchSettings, Strategy
from agentflow.repair.config import (
    ALL_NODES,
    RepairConfig,
    RepairSearchSettings,
    run_value,
    run_values_for,
)

RUN_DEFAULTS = ("concurrency", "seed")
"""Settings of the run a graph search node takes unless its `search:` sets them."""


def graph_searches(spec: WorkflowSpec) -> list[str]:
    """The workflow's graph search nodes (top level)."""
    return [name for name, node in spec.nodes.items() if node.search is not None]


def attempt_searches(spec: WorkflowSpec) -> list[str]:
    """The graph search nodes over chains of attempts (a subgraph with a `swe.test` node): those `--strategy` and
    `search.when_tests_fail` set (codemonkeys' trajectories search as their workflow says)."""
    return [name for name in graph_searches(spec)
            if any(step.type == "swe.test" for step in spec.nodes[name].subgraph.nodes.values())]


def search_summary(spec: WorkflowSpec) -> str | None:
    """What the workflow's graph search nodes run, for a progress line (`best_of_n, n=8`); None when it has none."""
    parts = []
    for name in graph_searches(spec):
        search = SearchSettings.model_validate(dict(spec.nodes[name].search or {}))
        parts.append(f"{search.strategy}, n={search.n}")
    return "; ".join(parts) or None


def strategy_search(search: RepairSearchSettings, strategy: Strategy) -> dict[str, Any]:
    """`--strategy` as graph search settings: best_of_n (n chains of attempts), mcts (as many expansions as
    best_of_n's chains make attempts, stopping at a value of 1 with `stop_on_success`), beam / tot / rebase."""
    if strategy == "mcts":
        return {"strategy": "mcts", "n": search.n * search.max_attempts, "c": search.c,
                "stop_at": 1.0 if search.stop_on_success else None}
    return {"strategy": strategy, "n": search.n}


def set_graph_searches(spec: WorkflowSpec, cfg: RepairConfig,
                       overrides: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Apply the run's settings to the graph search nodes; the overrides left for the typed nodes."""
    rest = dict(overrides)
    attempts = attempt_searches(spec)
    for name in graph_searches(spec):
        node = spec.nodes[name]
        search = {key: run_value(cfg, key) for key in RUN_DEFAULTS} | dict(node.search or {})
        if cfg.search.strategy is not None and name in attempts:
            search |= strategy_search(cfg.search, cfg.search.strategy)
        node.search = search | rest.pop(name, {})
    return rest


def searches_for_failing_tests(spec: WorkflowSpec, cfg: RepairConfig) -> WorkflowSpec | None:
    """A copy of `spec` whose graph search nodes search as `cfg.search.when_tests_fail` says (a node's own
    `-c nodes.<node>.*` over it), for a task whose tests fail at the base commit; None when nothing changes."""
    if cfg.search.strategy is not None or cfg.search.when_tests_fail is None:
        return None
    names = [name for name in attempt_searches(spec) if "strategy" not in cfg.nodes.get(name, {})]
    if not names:
        return None
    chosen = strategy_search(cfg.search, cfg.search.when_tests_fail)
    switched = spec.model_copy(deep=True)
    for name in names:
        node = switched.nodes[name]
        node.search = dict(node.search or {}) | chosen | dict(cfg.nodes.get(name, {}))
    return switched


def _typed(spec: WorkflowSpec) -> Iterator[tuple[str, NodeSpec, str]]:
    """Each typed node of `spec` and its subgraphs: its name, spec and type name."""
    for name, node in spec.nodes.items():
        if node.type:
            yield name, node, node.type
        if isinstance(node.subgraph, WorkflowSpec):
            yield from _typed(node.subgraph)


def node_settings_for(spec: WorkflowSpec, registry: NodeTypeRegistry,
                      overrides: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each typed node's explicit settings (the workflow's, then `-c nodes.<node>.*`), validated; a
    `-c nodes.X` naming no typed node is a ConfigError."""
    out: dict[str, dict[str, Any]] = {}
    for name, node, type_name in _typed(spec):
        parsed = registry.require(type_name, f"node '{name}'").parse_settings(
            {**node.settings, **overrides.get(name, {})}, f"node '{name}'")
        out[name] = parsed.model_dump(exclude_unset=True) if isinstance(parsed, BaseModel) else {}
    unknown = sorted(set(overrides) - set(out) - {ALL_NODES})
    if unknown:
        raise ConfigError(f"nodes.{unknown[0]}: the workflow has no typed node of that name",
                          hint=f"typed nodes: {', '.join(sorted(out)) or '(none)'}")
    return out


def give_settings(spec: WorkflowSpec, registry: NodeTypeRegistry, cfg: RepairConfig, node_settings: dict[str, dict[str, Any]]) -> None:
    """Each typed node's `settings:` become the ones it runs with: the run's value of every setting its type
    takes (`cfg`'s own, then `nodes.*`), then its own (`node_settings`), validated."""
    every = cfg.nodes.get(ALL_NODES, {})
    for name, node, type_name in _typed(spec):
        node_type = registry.require(type_name, f"node '{name}'")
        model = node_type.settings
        if model is None:
            continue
        run = run_values_for(cfg, model.model_fields)
        run |= {key: value for key, value in every.items() if key in model.model_fields}
        node.settings = run | node_settings.get(name, {})
        node_type.parse_settings(node.settings, f"node '{name}'")


def require_search(spec: WorkflowSpec, cfg: RepairConfig) -> None:
    """`--strategy` needs a search node over chains of attempts to set."""
    if cfg.search.strategy is not None and not attempt_searches(spec):
        raise UserError(f"--strategy {cfg.search.strategy}: workflow '{spec.name}' has no search over chains of "
                        f"attempts to set", hint="set a search node's strategy with -c nodes.<node>.strategy=...")


__all__ = ["RUN_DEFAULTS", "attempt_searches", "give_settings", "graph_searches", "node_settings_for", "require_search",
           "search_summary", "searches_for_failing_tests", "set_graph_searches", "strategy_search"]
