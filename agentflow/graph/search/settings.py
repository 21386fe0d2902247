"""A search node's settings (its `search:`): the strategies, what each reads, their problems and spellings."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

from pydantic import Field, ValidationError, field_validator

from agentflow.config import StrictConfig, strategy_spelling
from agentflow.errors import ConfigError, UserError, did_you_mean
from agentflow.graph.run.outcome import NodeFailed
from agentflow.graph.search.tree import branch_spec, read_path

if TYPE_CHECKING:
    from agentflow.graph.define.spec import WorkflowSpec

BRANCH_SEP = "~"
"""Separates the run's thread id, the search node and the branch id in a branch's thread id."""


Strategy = Literal["best_of_n", "beam", "tot", "rebase", "mcts"]
"""The search strategies, in the one spelling every setting of one uses (`strategy_spelling` folds others)."""
STRATEGIES: tuple[str, ...] = get_args(Strategy)


class SearchSettings(StrictConfig):
    """The `search:` of a node: how its subgraph's branches are run, valued and chosen (docs/concepts/search.md)."""

    strategy: Strategy = "best_of_n"
    """best_of_n (whole runs), beam / tot (keep the n best each step), rebase (reward-balanced expansion),
    mcts (UCT with concurrent expansions under virtual loss)."""
    strategy_key: str | None = None
    """Dotted state path naming the strategy for this run (`STRATEGY_NAMES`), overriding `strategy` when set."""
    n: int = Field(4, ge=1)
    """best_of_n: branches; beam/tot: branches kept each step; rebase: expansions each step; mcts: expansions."""
    expand: Annotated[int, Field(ge=1)] | list[Annotated[int, Field(ge=1)]] = 2
    """Children of one branch per step (beam/tot) or tree node (mcts); a list: per depth, the last repeating."""
    max_depth: int = Field(4, ge=1)
    """Most steps a branch takes in the stepwise strategies."""
    step_until: list[str] = Field(default_factory=list)
    """Subgraph nodes after which a step ends (default: after every node)."""
    value: str | None = None
    """Dotted state path that values a branch after each step (e.g. `tests.ok`); unset: every branch is worth 0."""
    tests: str | None = "tests"
    """Dotted state path of a branch's test result, kept per branch in the search report."""
    value_scale: float = Field(1.0, gt=0)
    """A numeric value is divided by this (100 for a 0-100 score), so values compare across nodes."""
    select: Literal["value", "vote", "smallest"] = "value"
    """The choice among finished branches: highest value, most common `select_key`, or smallest among the best."""
    select_key: str | None = None
    """Dotted state path that `vote` counts and `smallest` measures."""
    outputs: list[str] | None = None
    """State keys copied from the chosen branch (default: the declared keys its nodes changed)."""
    gather: list[str] = Field(default_factory=list)
    """List keys collected from every branch instead (each item once, in branch order)."""
    concurrency: int = Field(2, ge=1)
    """Branches or expansions in flight at once (their model calls overlap; the sandbox is shared)."""
    c: float = Field(1.0, ge=0)
    """mcts: the UCT exploration weight."""
    temperature: float = Field(0.3, gt=0)
    """rebase: softmax temperature over values when sharing out a step's expansions."""
    stop_at: float | None = None
    """End the search once a finished branch's value reaches this: no new branch or step starts."""
    seed: int = 0
    """Seeds the tie-breaks (which branch wins among equal values, which child UCT tries first)."""
    executor: Literal["in-process", "ray"] | None = None
    """Where each step runs: in this process, or as a Ray task (`remote.py`); None: the run's executor."""

    @field_validator("strategy", mode="before")
    @classmethod
    def _one_spelling(cls, value: Any) -> Any:
        return strategy_spelling(value) if isinstance(value, str) else value

    @field_validator("expand")
    @classmethod
    def _some_children(cls, value: int | list[int]) -> int | list[int]:
        if isinstance(value, list) and not value:
            raise ValueError("a list of children per depth needs at least one number")
        return value

    def expand_at(self, depth: int) -> int:
        """Children of a branch at `depth` (0: the search's start)."""
        if isinstance(self.expand, int):
            return self.expand
        return self.expand[min(depth, len(self.expand) - 1)]


COMMON_SETTINGS = frozenset({"strategy", "strategy_key", "n", "value", "value_scale", "select", "select_key",
                             "outputs", "gather", "concurrency", "stop_at", "seed", "executor", "tests"})
"""The settings every strategy reads (`value_scale` and `select_key` only with what they qualify)."""
STEPWISE_SETTINGS = frozenset({"max_depth", "step_until"})
READS: dict[str, frozenset[str]] = {
    "best_of_n": COMMON_SETTINGS,
    "beam": COMMON_SETTINGS | STEPWISE_SETTINGS | {"expand"},
    "tot": COMMON_SETTINGS | STEPWISE_SETTINGS | {"expand"},
    "rebase": COMMON_SETTINGS | STEPWISE_SETTINGS | {"temperature"},
    "mcts": COMMON_SETTINGS | STEPWISE_SETTINGS | {"expand", "c"},
}
"""Strategy -> the settings it reads; another setting given is said to be ignored (`ignored_settings`)."""


def settings_problems(settings: SearchSettings, where: str) -> list[str]:
    """Settings no run can honour, one line each naming the fix."""
    problems: list[str] = []
    if settings.stop_at is not None and not settings.value:
        problems.append(f"{where}: search.stop_at {settings.stop_at:g} needs search.value (without it every "
                        f"branch is worth 0); set value: to the state path that values a branch")
    if isinstance(settings.expand, list) and len(settings.expand) > settings.max_depth:
        problems.append(f"{where}: search.expand gives {len(settings.expand)} depths but max_depth is "
                        f"{settings.max_depth}, so the last {len(settings.expand) - settings.max_depth} never "
                        f"apply; shorten expand or raise max_depth")
    return problems


def ignored_settings(settings: SearchSettings) -> list[str]:
    """The settings given that this run's strategy does not read, one line each (`search.decision` events)."""
    strategy = settings.strategy
    out: list[str] = []
    for field in sorted(settings.model_fields_set - READS[strategy]):
        readers = [name for name, reads in READS.items() if field in reads and name != "tot"]
        verb = "does" if len(readers) == 1 else "do"
        out.append(f"{strategy} does not use search.{field} (only {', '.join(readers)} {verb}): ignored")
    if "select_key" in settings.model_fields_set and settings.select == "value":
        out.append("select value does not use search.select_key (select vote and smallest do): ignored")
    if "value_scale" in settings.model_fields_set and not settings.value:
        out.append("search.value_scale scales search.value, which is not set: ignored")
    return out


STRATEGY_NAMES: dict[str, str] = {"best_of_n": "best_of_n", "beam": "beam", "tot": "tot",
                                  "tree_of_thought": "beam", "rebase": "rebase", "mcts": "mcts"}
"""What a `strategy_key` value may name, and the strategy it runs."""


def strategy_for(settings: SearchSettings, state: Any, where: str) -> SearchSettings:
    """`settings` with the strategy the state names at `strategy_key` (unchanged without one there)."""
    if not settings.strategy_key:
        return settings
    named = read_path(state, settings.strategy_key)
    if named is None or named == "":
        return settings
    strategy = STRATEGY_NAMES.get(strategy_spelling(str(named)))
    if strategy is None:
        raise NodeFailed(where, "error", f"search.strategy_key '{settings.strategy_key}' holds {named!r}, which "
                         f"names no strategy (one of {', '.join(STRATEGY_NAMES)})")
    return settings.model_copy(update={"strategy": strategy})


def parse_search_settings(values: Any, where: str) -> SearchSettings:
    """A node's `search:` validated, or a ConfigError naming the bad key and the known ones."""
    if isinstance(values, SearchSettings):
        return values
    try:
        return SearchSettings.model_validate(dict(values or {}) if isinstance(values, Mapping) else values)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        known = ", ".join(SearchSettings.model_fields)
        near = did_you_mean(err["loc"][-1], SearchSettings.model_fields) if err["loc"] else ""
        raise ConfigError(f"{where}: search.{loc}: {err['msg']}{near} (search settings: {known})") from None


def branch_path(thread_id: str) -> list[str]:
    """The search nodes, outermost first, whose subgraph a branch's thread runs (`T~node~b1~inner~s4~b2` ->
    [node, inner]; [] for a run's own thread). A node's name may be followed by its pass (`s<step>`, a search
    node's later pass in a loop), then come its branch ids (`b<k>`)."""
    path: list[str] = []
    after_node = False
    for part in thread_id.split(BRANCH_SEP)[1:]:
        if re.fullmatch(r"b\d+", part) or (after_node and re.fullmatch(r"s\d+", part)):
            after_node = False
            continue
        path.append(part)
        after_node = True
    return path


def subgraph_spec(spec: WorkflowSpec, path: list[str]) -> WorkflowSpec:
    """The graph the search nodes `path` (outermost first) run as their branches (`spec` itself for [])."""
    for part in path:
        node = spec.nodes.get(part)
        if node is None or node.search is None:
            searches = [n for n, x in spec.nodes.items() if x.search is not None]
            raise UserError(f"{spec.name} has no search node {part!r}{did_you_mean(part, searches)}",
                            hint="copy the thread id the viewer or `--history` shows")
        spec = branch_spec(spec, node)
    return spec


__all__ = ["BRANCH_SEP", "COMMON_SETTINGS", "READS", "STEPWISE_SETTINGS", "STRATEGIES", "STRATEGY_NAMES",
           "SearchSettings", "Strategy", "branch_path", "ignored_settings", "parse_search_settings",
           "settings_problems", "strategy_for", "subgraph_spec"]
