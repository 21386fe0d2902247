"""The search tree: a branch, the subgraph branches run, values read from their state, the search report."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from agentflow.events.kinds import SearchNode

if TYPE_CHECKING:
    from agentflow.graph.define.spec import NodeSpec, WorkflowSpec

def branch_spec(parent: WorkflowSpec, node: NodeSpec) -> WorkflowSpec:
    """The subgraph a search node's branches run, over the workflow's state keys, tools and model."""
    sub: WorkflowSpec = node.subgraph
    update: dict[str, Any] = {}
    if parent.state and sub.state_class is None:
        update["state"] = {**parent.state, **sub.state}
    if parent.state_class is not None and sub.state_class is None and not sub.state:
        update["state_class"] = parent.state_class
    if parent.tools and not sub.tools:
        update["tools"] = list(parent.tools)
    if parent.model and not sub.model:
        update["model"] = parent.model
    if parent.source_path and not sub.source_path:
        update["source_path"] = parent.source_path
    return sub.model_copy(update=update) if update else sub


def read_path(state: Any, path: str | None) -> Any:
    """The value at dotted `path` of a state (mappings and attributes), None when any part is missing."""
    if not path:
        return None
    cur = state
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, Mapping) else getattr(cur, part, None)
        if cur is None:
            return None
    return cur


def as_value(raw: Any, scale: float) -> float:
    """A branch value from what its state holds at the value path."""
    if isinstance(raw, Mapping):
        for key in ("score", "value", "ok", "passed"):
            if key in raw:
                return as_value(raw[key], scale)
        return 0.0
    if isinstance(raw, bool):
        return float(raw)
    return float(raw) / scale if isinstance(raw, (int, float)) else 0.0


@dataclasses.dataclass(eq=False)
class Branch:
    """One node of the search tree: a run of the subgraph paused after a step, or finished."""

    id: str
    parent: Branch | None
    thread: str | None  # its checkpoint thread (None for the root: the run's state at the search node)
    state: dict[str, Any]
    snapshot: str | None  # the snapshot its workspace is at (None without a sandbox)
    depth: int = 0
    sample: int = 0  # which child of its parent it is (0: the first); siblings choose apart by it (`spread`)
    done: bool = False  # the subgraph reached its end in this branch
    error: str | None = None
    pending: bool = True  # its step is running: it has no checkpoint to expand from yet
    skipped: bool = False  # it never ran: the search reached `stop_at` while it waited
    action: str | None = None  # the nodes its step ran (`code → check → gate`)
    value: float = 0.0
    visits: int = 0
    value_sum: float = 0.0
    virtual: int = 0
    children: list[Branch] = dataclasses.field(default_factory=list)
    diff_id: str | None = None  # the workspace diff recorded at its last checkpoint (`history.DiffStore`)

    @property
    def mean(self) -> float:
        """The backed-up value: the mean of the values of the branches below it (mcts), else its own."""
        return self.value_sum / self.visits if self.visits else self.value

    def record(self, search: str, strategy: str) -> SearchNode:
        return SearchNode(search=search, strategy=strategy, thread=self.thread, depth=self.depth, action=self.action,
                          value=round(self.value, 4), mean=round(self.mean, 4), visits=self.visits,
                          terminal=self.done, error=self.error, snapshot_id=self.snapshot, diff_id=self.diff_id)


T = TypeVar("T")


def spread(sample: int, options: Sequence[T], pick: Callable[[Sequence[T]], T], *,
           key: Callable[[T], Hashable] = lambda option: option, avoid: Collection[Hashable] = ()) -> T:
    """The option a branch takes that is child number `sample` of its parent (`Branch.sample`, a node's
    `ctx.run.sample`), when the parent's children take options in turn: each takes `pick`'s choice among the
    options whose `key` no earlier sibling took (nor one in `avoid`), all options again once none is left. So
    siblings, which start from one state and run concurrently, take distinct options while distinct ones remain,
    whatever `pick` prefers; `pick` is called `sample + 1` times (a pick that keeps counts counts each)."""
    if not options:
        raise ValueError("spread: no options to choose from")
    taken: set[Hashable] = set(avoid)
    chosen = options[0]
    for _ in range(sample + 1):
        free = [option for option in options if key(option) not in taken]
        if not free:  # every option was taken: a new round
            taken.clear()
            free = list(options)
        chosen = pick(free)
        taken.add(key(chosen))
    return chosen


REPORT_DIFF_CHARS = 20_000
"""Most characters of a branch's diff kept in the search report (the whole one is in the run folder's `diffs/`)."""


class BranchReport(BaseModel):
    """One branch of a search, as the search report (the search node's `output:`) keeps it."""

    id: str
    parent: str | None
    depth: int
    action: str | None = None
    """The nodes its last step ran (`code → check → gate`)."""
    value: float
    """Its own value, read from its state after its step."""
    mean: float
    """Its backed-up value (mcts: the mean over its subtree; else its own value)."""
    visits: int = 0
    terminal: bool
    error: str | None = None
    tests: Any = None
    """Its test result, from the state path `search.tests` (None: nothing there)."""
    diff_id: str | None = None
    """Id of its workspace diff in the run folder's `diffs/`."""
    diff: str | None = None
    """Its workspace diff against the run's base (the first `REPORT_DIFF_CHARS` characters)."""
    thread: str | None = None
    """Its checkpoint thread (`THREAD~node~b3`): `agentflow run --history` / `--fork` take it."""


class SearchReport(BaseModel):
    """What a search records for its branches: under the search node's `output:` key, as a dict."""

    strategy: str
    chosen: str
    value: float
    """The chosen branch's own value."""
    mean: float
    """The root's backed-up value (mcts), else the chosen one's value."""
    visits: int
    """The root's visits (mcts: the expansions backed up), else 0."""
    branches: list[BranchReport]
    restores: int = 0
    stopped_at: str | None = None


__all__ = ["REPORT_DIFF_CHARS", "Branch", "BranchReport", "SearchReport", "as_value", "branch_spec", "read_path",
           "spread"]
