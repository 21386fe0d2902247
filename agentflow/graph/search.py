"""Search over any workflow: a node whose `subgraph:` runs as the branches of a search.

    nodes:
      attempt:
        search: {strategy: mcts, n: 6, value: tests.ok, step_until: [check]}
        subgraph:
          nodes:
            code:  {agent: coder, args: {input: {task: task, tests: tests}}, output: code, next: check}
            check: {fn: agentflow.graph.demo:check_work, writes: [diff, tests], next: END}
        next: critique

A *branch* is a real run of the subgraph: its nodes run as graph nodes (events, traces, the journal), with
its own thread of checkpoints in the run's checkpointer (`<thread>~<search node>~<branch id>`) and its own
fork of the run's sandbox workspace (`branch_workspace.BranchSandbox`). A branch starts from the run's state
at the search node, or — in the stepwise strategies — from another branch's checkpoint *and* workspace: an
expansion copies the parent branch's last checkpoint into a new thread and runs the subgraph on from there
until the next step ends (after a node named in `step_until`, or after any node) or the subgraph ends.

Strategies (one engine; `SearchSettings.strategy`, or per run the state path `strategy_key` names, e.g. the
algorithm a selection node chose for this instance):
- `best_of_n`: `n` branches each run the whole subgraph.
- `beam` (tree-of-thought's breadth-first search): every kept branch is expanded `expand` times a step; the
  `n` best by value are kept.
- `rebase` (reward-balanced expansion): each step spends `n` expansions over the kept branches in
  proportion to softmax(value / temperature), so better branches get more children and none is cut to zero
  by rank alone.
- `mcts`: `n` expansions chosen by UCT (value + c * sqrt(ln N / visits)); up to `concurrency` run at once,
  the branches being expanded counting as visits with value 0 (virtual loss) so concurrent selections spread.
  When every tree node has its `expand` children (finished branches take none), the open node with the
  highest backed-up mean takes one more: `n` expansions are made.

Every setting is read by the strategy in effect (`READS`, an allowlist), refused by validation when no run can
honour it (`settings_problems`), or said to be ignored as the search starts; what the search decides that its
settings did not spell out (a widening, an early end) is a `search.decision` event, printed by `agentflow run`.

A branch's value is read from its state (`value:` a dotted path; a bool counts 1/0, a number is divided by
`value_scale`, a dict's `score`/`value`/`ok`/`passed` is used) — so a value is whatever node of the subgraph
writes there: tests, a critic or value agent, a verifier. The result is chosen among finished branches by
value, by a vote over a state path, or as the smallest among the best; its state keys are the node's update
and its workspace becomes the run's. With `stop_at`, a finished branch valued that high ends the search (nothing
new starts after it). A branch that fails is recorded (event `search.branch` with its error)
and scores nothing; a search none of whose branches finished fails the node.

Each step runs in this process, or — `executor: ray`, or the run's executor — as a call on a worker node
(`search_remote`): its checkpoints, events, usage and workspace come back into the run, so the tree, the
values and the choice are the same.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, Field, ValidationError, field_validator

from agentflow.config import StrictConfig, strategy_spelling
from agentflow.errors import ConfigError, did_you_mean
from agentflow.graph.outcome import NodeFailed, one_line

if TYPE_CHECKING:
    from agentflow.graph.context import RunContext
    from agentflow.graph.spec import NodeSpec, WorkflowSpec

BRANCH_SEP = "~"
"""Separates the run's thread id, the search node and the branch id in a branch's thread id."""


class SearchSettings(StrictConfig):
    """The `search:` of a node: how its subgraph's branches are run, valued and chosen."""

    strategy: Literal["best_of_n", "beam", "tot", "rebase", "mcts"] = "best_of_n"
    """best_of_n (whole runs), beam / tot (keep the n best each step), rebase (reward-balanced expansion),
    mcts (UCT with concurrent expansions under virtual loss)."""
    strategy_key: str | None = None
    """Dotted state path naming the strategy for this run, e.g. `algorithm` written by `reason.select`; its
    values best_of_n / tree_of_thought (= beam) / beam / tot / rebase / mcts. Overrides `strategy` when the
    state holds a value there (none there: `strategy`)."""
    n: int = Field(4, ge=1)
    """best_of_n: branches; beam/tot: branches kept each step; rebase: expansions each step; mcts: expansions."""
    expand: Annotated[int, Field(ge=1)] | list[Annotated[int, Field(ge=1)]] = 2
    """Children of one branch per step (beam/tot); most children of one tree node (mcts). A list gives it per
    depth, the last repeating: `[3, 1]` is three first steps from the start, then one continuation each."""
    max_depth: int = Field(4, ge=1)
    """Most steps a branch takes in the stepwise strategies (a branch is cut there, unfinished, and competes
    with the finished ones only when none finished)."""
    step_until: list[str] = Field(default_factory=list)
    """Subgraph nodes after which a step ends (default: after every node). best_of_n runs branches through."""
    value: str | None = None
    """Dotted state path that values a branch after each step (e.g. `tests.ok`, `critique.score`); without it
    every branch is worth 0 and the choice falls to `select`'s tie-break."""
    tests: str | None = "tests"
    """Dotted state path of a branch's test result, kept per branch in the search report (`BranchReport.tests`;
    None there when the branch's state has nothing at that path)."""
    value_scale: float = Field(1.0, gt=0)
    """A numeric value is divided by this (100 for a 0-100 score), so values compare across nodes."""
    select: Literal["value", "vote", "smallest"] = "value"
    """How the result is chosen among finished branches: the highest value; the most common `select_key`
    value (ties: higher value); or, among the highest-valued, the smallest `select_key` (e.g. a diff)."""
    select_key: str | None = None
    """Dotted state path that `vote` counts and `smallest` measures."""
    outputs: list[str] | None = None
    """State keys copied from the chosen branch into the run's state (default: every key the subgraph's
    nodes wrote that the workflow's state has)."""
    gather: list[str] = Field(default_factory=list)
    """State keys (lists) collected from every branch instead of taken from the chosen one: the items of all
    branches, each once (a child's list starts as its parent's), in branch order; so a later node sees every
    branch's work, e.g. a vote over the candidates of all branches."""
    concurrency: int = Field(2, ge=1)
    """Branches or expansions in flight at once (their model calls overlap; the sandbox is shared)."""
    c: float = Field(1.0, ge=0)
    """mcts: the UCT exploration weight."""
    temperature: float = Field(0.3, gt=0)
    """rebase: softmax temperature over values when sharing out a step's expansions."""
    stop_at: float | None = None
    """End the search once a finished branch's value reaches this (e.g. 1.0: every test passes): no new
    branch or step starts; steps already running finish. None: run the strategy to its end."""
    seed: int = 0
    """Seeds the tie-breaks (which branch wins among equal values, which child UCT tries first)."""
    executor: Literal["in-process", "ray"] | None = None
    """Where each step runs (best_of_n: a whole branch; the stepwise strategies: one expansion): in this
    process, or as a Ray task on a worker node (`search_remote`). None: the run's executor
    (`agentflow run --executor`, `RunContext.executor`), in this process when the run has none."""

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
"""Strategy -> the settings it reads: an allowlist; a setting given that the strategy in effect does not read
is said to be ignored (`ignored_settings`), never dropped silently."""


def settings_problems(settings: SearchSettings, where: str) -> list[str]:
    """Settings no run can honour, one line each naming the fix (validation errors: `agentflow validate`
    and `run` exit 2 on them)."""
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
    """The settings given (in the YAML, by `-c` or from Python) that this run's strategy does not read, one
    line each (the search emits each as a `search.decision` event as it starts)."""
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


def branch_spec(parent: WorkflowSpec, node: NodeSpec) -> WorkflowSpec:
    """The subgraph a search node's branches run: its own state keys over the workflow's (a branch reads and
    writes the run's state), its tools and model defaulting to the workflow's."""
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
        if isinstance(cur, Mapping):
            cur = cur.get(part)
        else:
            cur = getattr(cur, part, None)
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
        return 1.0 if raw else 0.0
    if isinstance(raw, (int, float)):
        return float(raw) / scale
    return 0.0


@dataclasses.dataclass(eq=False)
class Branch:
    """One node of the search tree: a run of the subgraph paused after a step, or finished."""

    id: str
    parent: Branch | None
    thread: str | None
    """The branch's checkpoint thread (None for the root: the run's state at the search node)."""
    state: dict[str, Any]
    snapshot: str | None
    """The snapshot its workspace is at (None without a sandbox)."""
    depth: int = 0
    sample: int = 0
    """Which child of its parent it is (0: the first): nodes that sample keep the first greedy, seed the rest."""
    done: bool = False
    """The subgraph reached its end in this branch."""
    error: str | None = None
    pending: bool = True
    """Its step is running: it has no checkpoint to expand from yet."""
    skipped: bool = False
    """It never ran: the search reached `stop_at` while it waited for its turn (it is not in the tree)."""
    action: str | None = None
    """The nodes its step ran (`code → check → gate`)."""
    value: float = 0.0
    visits: int = 0
    value_sum: float = 0.0
    virtual: int = 0
    children: list[Branch] = dataclasses.field(default_factory=list)

    diff_id: str | None = None
    """Id of the workspace diff recorded at the branch's last checkpoint (`history.DiffStore`; None: no
    workspace, or no run folder)."""

    @property
    def mean(self) -> float:
        """The backed-up value: the mean of the values of the branches below it (mcts), else its own."""
        return self.value_sum / self.visits if self.visits else self.value

    def record(self, search: str, strategy: str) -> dict[str, Any]:
        return {"search": search, "strategy": strategy, "thread": self.thread, "depth": self.depth, "action": self.action,
                "value": round(self.value, 4), "mean": round(self.mean, 4), "visits": self.visits,
                "terminal": self.done, "error": self.error, "snapshot_id": self.snapshot, "diff_id": self.diff_id}


REPORT_DIFF_CHARS = 20_000
"""Most characters of a branch's diff kept in the search report (the whole diff stays in the run folder's
`diffs/`, by `diff_id`)."""


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
    """Its backed-up value: mcts, the mean value of the branches below it and itself; else its own value."""
    visits: int = 0
    terminal: bool
    error: str | None = None
    tests: Any = None
    """Its test result, from the state path `search.tests` (None: nothing there)."""
    diff_id: str | None = None
    """Id of its workspace diff in the run folder's `diffs/` (None: the run had no workspace or folder)."""
    diff: str | None = None
    """Its workspace diff against the run's base (the first `REPORT_DIFF_CHARS` characters)."""


class SearchReport(BaseModel):
    """What a search records for its branches: under the search node's `output:` key, as a dict."""

    strategy: str
    chosen: str
    value: float
    """The chosen branch's own value."""
    mean: float
    """The root's backed-up value: the mean over every branch valued (mcts), else the chosen one's value."""
    visits: int
    """The root's visits (mcts: the expansions backed up), else 0."""
    branches: list[BranchReport]
    restores: int = 0
    stopped_at: str | None = None


class SearchRun:
    """One execution of a search node: the tree, the branches in flight, and the choice."""

    def __init__(self, name: str, node: NodeSpec, spec: WorkflowSpec, rt: RunContext,
                 settings: SearchSettings, thread: str, compile: Callable[..., Any], executor: Any = None) -> None:
        self.name = name
        self.compile = compile
        """`compile.compile_workflow` (passed in: the compiler builds search nodes, so this module cannot import it)."""
        self.executor = executor
        """An open remote `Executor` the steps run on (None: in this process)."""
        self.remote: Any = None
        """The steps on `executor` (`search_remote.RemoteSteps`), set up as the search starts."""
        self.sub = branch_spec(spec, node)
        self.mcp = list(spec.mcp_servers)
        self.parent_keys = set(spec.state) if spec.state else None
        self.rt = rt
        self.settings = settings
        self.thread = thread
        self.rng = random.Random(settings.seed)
        self.branches: list[Branch] = []
        self.slots = asyncio.Semaphore(settings.concurrency)
        self.shared: Any = None
        self.stepwise = settings.strategy != "best_of_n"
        self._saver: Any = None
        self.root: Branch | None = None
        self._ids = 0
        self._loaded: dict[str, list[Branch]] = {}
        """Parent id -> branches a killed run of this search had made (a resume takes them before new ones)."""
        self.solved: Branch | None = None
        """The first finished branch whose value reached `stop_at`: the search starts nothing after it."""
        self._diffs: dict[str, str] = {}
        """Diff id -> the diff's text (`read_diffs`)."""

    # -- the tree ---------------------------------------------------------------------------------------------

    def _new(self, parent: Branch) -> Branch:
        """A child of `parent` (the root: the run's state at the search node), before it runs: so concurrent
        selections see it."""
        bid = f"b{self._ids}"
        self._ids += 1
        # a child's thread extends its parent's: the tree is in the thread ids, for a resumed search to rebuild
        prefix = parent.thread or f"{self.thread}{BRANCH_SEP}{self.name}"
        branch = Branch(id=bid, parent=parent, thread=f"{prefix}{BRANCH_SEP}{bid}", state={},
                        snapshot=parent.snapshot, depth=parent.depth + 1)
        self._attach(branch)
        return branch

    def _attach(self, branch: Branch) -> None:
        self.branches.append(branch)
        assert branch.parent is not None
        branch.sample = len(branch.parent.children)
        branch.parent.children.append(branch)

    def _drop(self, branch: Branch) -> Branch:
        """Take out of the tree a branch that never ran (the search was solved while it waited)."""
        self.branches.remove(branch)
        assert branch.parent is not None
        branch.parent.children.remove(branch)
        branch.skipped, branch.pending = True, False
        return branch

    def _node_id(self, branch: Branch) -> str:
        return self.name if branch.parent is None else f"{self.name}/{branch.id}"

    def _emit(self, branch: Branch, **extra: Any) -> None:
        parent = self._node_id(branch.parent) if branch.parent is not None else None
        self.rt.emit("search.node", node_id=self._node_id(branch), parent_id=parent,
                     **branch.record(self.name, self.settings.strategy), **extra)

    def finish(self, chosen: Branch) -> None:
        """The tree's final record: every node again with its visits (the last event of a node id wins), the
        chosen one marked with how it was chosen."""
        for branch in [self.root, *self.branches] if self.root is not None else self.branches:
            mark = {"chosen": True, "select": self.settings.select} if branch is chosen else {}
            self._emit(branch, final=True, **mark)

    # -- running one step of a branch -------------------------------------------------------------------------

    def _branch_context(self, branch: Branch) -> RunContext:
        from agentflow.graph.branch_workspace import BranchSandbox

        sandbox = BranchSandbox(self.shared, branch.snapshot or "") if self.shared is not None else None
        events = BranchEvents(self.rt.events, self.name, branch.id) if self.rt.events is not None else None
        return dataclasses.replace(self.rt, sandbox=sandbox, events=cast(Any, events), branch=branch.thread,
                                   sample=branch.sample, after_tool_call=None)

    def _graph(self, rt: RunContext) -> Any:
        return self.compile(self.sub, rt, self.checkpointer(),
                            interrupt_after=self.interrupt_after() if self.stepwise else None)

    def _config(self, branch: Branch) -> dict[str, Any]:
        return {"configurable": {"thread_id": branch.thread}, "recursion_limit": self.sub.step_limit or 1000}

    async def _run_branch(self, branch: Branch, *, resumed: bool = False) -> Branch:
        """Run one step of `branch` (best_of_n: the whole subgraph) from its parent's checkpoint and workspace;
        `resumed`: a step a killed run had begun, continued from the branch's own last checkpoint."""
        parent = branch.parent
        assert parent is not None and branch.thread is not None
        async with self.slots:
            if self.solved is not None:
                return self._drop(branch)
            t0 = time.perf_counter()
            rt = self._branch_context(branch)
            graph = self._graph(rt)
            config = self._config(branch)
            self.rt.emit("search.branch", node_id=self._node_id(branch), event="resume" if resumed else "start",
                         parent=parent.id, search=self.name)
            setup = time.perf_counter() - t0
            try:
                if not resumed and parent.thread is not None:
                    await self._copy_checkpoint(parent, branch)  # it names the parent's workspace already
                    setup = time.perf_counter() - t0
                # from here each checkpoint of the branch records the branch's workspace (the runner's hook)
                self.rt.branch_workspaces[branch.thread] = rt.sandbox
                inputs = self._inputs(parent.state) if parent.thread is None and not resumed else None
                if self.remote is not None:
                    branch.error = await self.remote.step(branch, rt, inputs)
                else:
                    await graph.ainvoke(inputs, config)
            except Exception as exc:  # noqa: BLE001 - a branch's failure is that branch's, recorded below
                branch.error = one_line(exc)
            finally:
                self.rt.branch_workspaces.pop(branch.thread, None)
            snapshot = await graph.aget_state(config)
            branch.state = dict(snapshot.values) if isinstance(snapshot.values, Mapping) else {}
            branch.done = branch.error is None and not snapshot.next
            if branch.error is None and not branch.done:
                self._mark(snapshot.config)
            if rt.sandbox is not None:
                branch.snapshot = rt.sandbox.snapshot_id
            if isinstance(rt.events, BranchEvents):
                branch.action = " → ".join(rt.events.ran)
        raw = read_path(branch.state, self.settings.value)
        branch.value = 0.0 if branch.error else as_value(raw, self.settings.value_scale)
        branch.pending = False
        restores = getattr(rt.sandbox, "restore_seconds", None) or [0.0]
        self.rt.emit("search.branch", node_id=self._node_id(branch), event="end", search=self.name,
                     value=branch.value, terminal=branch.done, error=branch.error,
                     setup_ms=round(setup * 1000, 2), restore_ms=round(restores[0] * 1000, 2))
        self._emit(branch)
        self._check_solved(branch)
        return branch

    def _check_solved(self, branch: Branch) -> None:
        stop_at = self.settings.stop_at
        if stop_at is None or self.solved is not None or not branch.done or branch.error or branch.value < stop_at:
            return
        self.solved = branch
        self.rt.emit("search.stop", node_id=self.name, search=self.name, branch=branch.id, value=branch.value,
                     stop_at=stop_at)

    def _expand(self, parent: Branch) -> Any:
        """A new child of `parent` run one step, or — in a resumed search — a child a killed run had made there:
        taken as it was when its step had finished, else continued from its own last checkpoint."""
        waiting = self._loaded.get(parent.id)
        if waiting:
            child = waiting.pop(0)
            self._attach(child)
            if child.pending:
                return self._run_branch(child, resumed=True)
            return self._taken(child)
        return self._run_branch(self._new(parent))

    async def _taken(self, branch: Branch) -> Branch:
        self.rt.emit("search.branch", node_id=self._node_id(branch), event="reused", search=self.name,
                     value=branch.value, terminal=branch.done)
        self._check_solved(branch)
        return branch

    def interrupt_after(self) -> Any:
        """Where a step ends: after the nodes `step_until` names, else after any node."""
        return list(self.settings.step_until) or "*"

    def checkpointer(self) -> Any:
        """The run's checkpointer (an in-memory one for a run without: branches still pause and fork)."""
        if self.rt.checkpointer is not None:
            return self.rt.checkpointer
        if self._saver is None:  # a run without a checkpointer still needs branches to pause and fork
            from langgraph.checkpoint.memory import InMemorySaver

            self._saver = InMemorySaver()
        return self._saver

    def _inputs(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """What a branch from the search's start is given: the run's state, cut to the keys of the subgraph's
        state (its declared ones and those its typed nodes read and write, as its compiled schema has them)."""
        if not self.sub.state:
            return dict(state)
        keys = set(self.sub.state)
        if any(node.type for node in self.sub.nodes.values()):
            from agentflow.graph.nodetypes import typed_keys, workflow_registry

            keys.update(typed_keys(self.sub, workflow_registry(self.sub, self.rt.node_types)))
        return {k: v for k, v in state.items() if k in keys}

    async def _copy_checkpoint(self, parent: Branch, child: Branch) -> None:
        """The child's thread starts at the parent's last checkpoint (LangGraph's fork, into a new thread)."""
        saver = self.checkpointer()
        saved = await saver.aget_tuple({"configurable": {"thread_id": parent.thread, "checkpoint_ns": ""}})
        if saved is None:
            raise NodeFailed(self.name, "error", f"branch {parent.id} has no checkpoint to expand from")
        metadata = {**saved.metadata, "forked_from": {"thread_id": parent.thread,
                                                      "checkpoint_id": saved.checkpoint["id"]}}
        await saver.aput({"configurable": {"thread_id": child.thread, "checkpoint_ns": ""}},
                         saved.checkpoint, metadata, dict(saved.checkpoint["channel_versions"]))

    # -- strategies -------------------------------------------------------------------------------------------

    async def run(self, state: Mapping[str, Any]) -> Branch:
        if self.rt.sandbox is not None:
            from agentflow.graph.branch_workspace import SharedSandbox

            self.shared = SharedSandbox(self.rt.sandbox)
        root = Branch(id="root", parent=None, thread=None, state=dict(state),
                      snapshot=await self.shared.snapshot() if self.shared is not None else None, depth=0,
                      pending=False)
        self.root = root
        self._emit(root)
        if self.executor is not None:
            from agentflow.graph.search_remote import RemoteSteps

            self.remote = await RemoteSteps.open(self, self.executor, root)
        await self._load(root)
        for text in ignored_settings(self.settings):
            self.decide(text)
        strategy = {"best_of_n": self._best_of_n, "beam": self._beam, "tot": self._beam,
                    "rebase": self._beam, "mcts": self._mcts}[self.settings.strategy]
        await strategy(root)
        self._say_why_ended()
        return self._choose()

    def _say_why_ended(self) -> None:
        """A search that made fewer expansions than `n` asked (best_of_n, mcts) because it was stopped says
        what stopped it."""
        s = self.settings
        made = len(self.branches)
        if s.strategy not in ("best_of_n", "mcts") or made >= s.n:
            return
        budget = self.rt.budget.exceeded() if self.rt.budget is not None else None
        if self.solved is not None:
            why = f"branch {self.solved.id} reached stop_at {s.stop_at:g} (value {self.solved.value:.2f})"
        elif budget is not None:
            why = f"the run's budget ({budget}) is spent"
        else:
            why = "no branch could be run"
        self.decide(f"{s.strategy}: {made} of n={s.n} {'branches' if s.strategy == 'best_of_n' else 'expansions'}"
                    f" made: {why}", made=made)

    # -- resuming a search a killed run had begun --------------------------------------------------------------

    async def _load(self, root: Branch) -> None:
        """The branches of an earlier run of this search (same thread), from the checkpointer: each with its
        state, value and workspace, `pending` when its step had not finished."""
        prefix = f"{self.thread}{BRANCH_SEP}{self.name}{BRANCH_SEP}"
        threads = sorted({t.config["configurable"]["thread_id"] async for t in self.checkpointer().alist(None)
                          if str(t.config["configurable"]["thread_id"]).startswith(prefix)
                          and not t.config["configurable"].get("checkpoint_ns")}, key=lambda t: (t.count(BRANCH_SEP), t))
        if not threads:
            return
        by_thread: dict[str | None, Branch] = {None: root}
        graph = self._graph(self.rt)
        for thread in threads:
            parent_thread = thread.rsplit(BRANCH_SEP, 1)[0]
            parent = by_thread.get(parent_thread if parent_thread != prefix[:-1] else None)
            if parent is None:
                continue  # its parent is gone (pruned): it cannot be continued
            branch = await self._loaded_branch(graph, thread, parent)
            by_thread[thread] = branch
            self._loaded.setdefault(parent.id, []).append(branch)
            self._ids = max(self._ids, int(branch.id[1:]) + 1)
        for waiting in self._loaded.values():
            waiting.sort(key=lambda b: int(b.id[1:]))  # creation order: each takes its old place among siblings
        self.rt.emit("search.resume", node_id=self.name, branches=len(threads),
                     finished=sum(1 for b in by_thread.values() if not b.pending and b is not root))

    async def _loaded_branch(self, graph: Any, thread: str, parent: Branch) -> Branch:
        saved = await self.checkpointer().aget_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
        snapshot = await graph.aget_state({"configurable": {"thread_id": thread}})
        branch = Branch(id=thread.rsplit(BRANCH_SEP, 1)[1], parent=parent, thread=thread,
                        state=dict(snapshot.values) if isinstance(snapshot.values, Mapping) else {},
                        snapshot=parent.snapshot, depth=parent.depth + 1)
        branch.done = not snapshot.next
        branch.pending = not branch.done and not self._marked(saved)
        if not branch.pending:
            branch.value = as_value(read_path(branch.state, self.settings.value), self.settings.value_scale)
        if self.shared is not None:
            branch.snapshot = await self._workspace_at(saved, parent)
        return branch

    def _mark(self, config: Mapping[str, Any]) -> None:
        """Note in the run's journal that the branch's step ended at this checkpoint (a resume takes the branch
        as it is there instead of running its next step). A kill between the checkpoint and the mark costs one
        step run again on resume."""
        journal = self.rt.journal
        if journal is not None and hasattr(journal, "mark"):
            journal.mark(_step_key(config))

    def _marked(self, saved: Any) -> bool:
        journal = self.rt.journal
        return saved is not None and journal is not None and hasattr(journal, "marked") and journal.marked(
            _step_key(saved.config))

    async def _workspace_at(self, saved: Any, parent: Branch) -> str | None:
        """A snapshot of the workspace recorded at checkpoint `saved` (the run's base plus its diff); the
        parent's when none was recorded there."""
        from agentflow.graph.branch_workspace import end_processes
        from agentflow.graph.history import DIFF_KEY, DiffStore

        digest = (saved.metadata or {}).get(DIFF_KEY) if saved is not None else None
        if not digest or self.rt.run_dir is None:
            return parent.snapshot
        sandbox = self.shared.sandbox
        diff = DiffStore(self.rt.run_dir).get(str(digest))
        async with self.shared.lock:
            await end_processes(sandbox)  # as before any branch's workspace is set up (branch_workspace.py)
            if sandbox.base is not None:
                await sandbox.restore(sandbox.base)  # the run's workspace as loaded, then the branch's changes
            if diff:
                applied = await sandbox.apply_patch(diff)
                if not applied.ok:
                    raise NodeFailed(self.name, "error", f"a resumed branch's recorded workspace does not apply: "
                                     f"{applied.output[-300:]}")
            current = str(await sandbox.snapshot())
            self.shared.current = current
            return current

    def _stopped(self) -> bool:
        """No new branch or step starts: the budget is spent or a branch reached `stop_at`."""
        budget = self.rt.budget
        return self.solved is not None or (budget is not None and budget.exceeded() is not None)

    async def _best_of_n(self, root: Branch) -> None:
        await asyncio.gather(*[self._expand(root) for _ in range(self.settings.n)])

    async def _beam(self, root: Branch) -> None:
        s = self.settings
        frontier: list[Branch] = [root]
        for _ in range(s.max_depth):
            if not frontier or self._stopped():
                return
            plan = (self._rebase_plan(frontier) if s.strategy == "rebase"
                    else [(b, s.expand_at(b.depth)) for b in frontier])
            jobs = [self._expand(b) for b, k in plan for _ in range(k)]
            children = await asyncio.gather(*jobs)
            alive = [c for c in children if c.error is None and not c.done and not c.skipped]
            keep = s.n if s.strategy != "rebase" else len(alive)
            frontier = sorted(alive, key=lambda c: (-c.value, self.rng.random()))[:keep]

    def _rebase_plan(self, frontier: list[Branch]) -> list[tuple[Branch, int]]:
        """`n` expansions shared over the frontier by softmax(value / temperature), largest remainders first."""
        s = self.settings
        top = max(b.value for b in frontier)
        weights = [math.exp((b.value - top) / s.temperature) for b in frontier]
        total = sum(weights)
        shares = [s.n * w / total for w in weights]
        counts = [int(x) for x in shares]
        order = sorted(range(len(frontier)), key=lambda i: -(shares[i] - counts[i]))
        for i in order[: s.n - sum(counts)]:
            counts[i] += 1
        return [(b, k) for b, k in zip(frontier, counts, strict=True) if k]

    async def _mcts(self, root: Branch) -> None:
        s = self.settings
        running: set[asyncio.Task[Branch]] = set()
        started = 0
        while started < s.n or running:
            while started < s.n and len(running) < s.concurrency and not self._stopped():
                leaf = self._select(root)
                if leaf is None and not running:
                    leaf = self._widen(root, started)
                if leaf is None:
                    break
                path = _path(leaf)
                for b in path:
                    b.virtual += 1
                started += 1
                task = asyncio.create_task(self._expand(leaf))
                task.add_done_callback(_release(path))
                running.add(task)
            if not running:
                return
            done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                child = task.result()
                if child.skipped:
                    continue
                for b in _path(child):
                    b.visits += 1
                    b.value_sum += child.value

    def _select(self, root: Branch) -> Branch | None:
        """UCT descent to a node that can take another child; in-flight expansions count as visits worth 0."""
        s = self.settings
        node = root
        while not self._can_grow(node):
            options = [c for c in node.children if self._expandable(c)]
            if not options:
                return None
            total = node.visits + node.virtual

            def uct(c: Branch, total: int = total) -> tuple[float, float]:
                n = c.visits + c.virtual
                q = c.value_sum / n if n else c.value
                return q + s.c * math.sqrt(math.log(total + 1) / (n + 1)), self.rng.random()

            node = max(options, key=uct)
        return node

    def _widen(self, root: Branch, started: int) -> Branch:
        """Every tree node has its `expand` children (or finished, failed, or is at max_depth) and expansions
        of `n` are left: the open node with the highest backed-up mean takes one more child (the root is
        always open), so `n` is what the search makes. A `search.decision` event says so."""
        s = self.settings
        open_nodes = [b for b in [root, *self.branches]
                      if not b.pending and b.error is None and not b.done and b.depth < s.max_depth]
        node = max(open_nodes, key=lambda b: (b.mean, -b.depth, -int(b.id[1:]) if b.parent else 1))
        self.decide(f"mcts: no tree node can take another child under expand={s.expand_at(node.depth)} "
                    f"({started} of n={s.n} expansions made); widening {node.id} (mean {node.mean:.2f}) to "
                    f"{len(node.children) + 1} children", widened=node.id)
        return node

    def decide(self, text: str, **data: Any) -> None:
        """A choice the search made that its settings did not spell out: a `search.decision` event (printed by
        `agentflow run`, kept in events.jsonl)."""
        self.rt.emit("search.decision", node_id=self.name, search=self.name, decision=text, **data)

    def _can_grow(self, node: Branch) -> bool:
        s = self.settings
        return (not node.pending and node.error is None and not node.done and node.depth < s.max_depth
                and len(node.children) < s.expand_at(node.depth))

    def _expandable(self, node: Branch) -> bool:
        return self._can_grow(node) or any(self._expandable(c) for c in node.children)

    # -- the choice -------------------------------------------------------------------------------------------

    def _choose(self) -> Branch:
        s = self.settings
        finished = [b for b in self.branches if b.done]
        pool = finished or [b for b in self.branches if b.error is None and not b.children]
        if not pool:
            errors = sorted({b.error or "" for b in self.branches})
            raise NodeFailed(self.name, "error", f"no branch of the search finished: {'; '.join(errors)[:500]}")
        ties = {id(b): self.rng.random() for b in pool}
        if s.select == "vote":
            votes = Counter(_key(read_path(b.state, s.select_key)) for b in pool)
            return max(pool, key=lambda b: (votes[_key(read_path(b.state, s.select_key))], b.value, ties[id(b)]))
        best = max(b.value for b in pool)
        if s.select == "smallest":
            top = [b for b in pool if b.value == best]
            return min(top, key=lambda b: (len(_key(read_path(b.state, s.select_key))), -ties[id(b)]))
        return max(pool, key=lambda b: (b.value, ties[id(b)]))

    def updates(self, chosen: Branch, before: Mapping[str, Any], output_key: str | None) -> dict[str, Any]:
        """The run's update: the chosen branch's `outputs` (default: the keys whose values the branch changed)
        and, under `output_key`, the search's report."""
        keys = self.settings.outputs
        if keys is None:
            changed = (k for k, v in chosen.state.items() if k not in before or before[k] != v)
            keys = sorted(k for k in changed if self.parent_keys is None or k in self.parent_keys)
        out = {k: chosen.state.get(k) for k in keys if k in chosen.state}
        for key in self.settings.gather:
            out[key] = self.gathered(key)
        if output_key is not None:
            out[output_key] = self.report(chosen)
        return out

    def gathered(self, key: str) -> list[Any]:
        """The items of list `key` over every branch's state (failed branches' too: what they did before they
        failed stands), each item once."""
        seen: set[str] = set()
        out: list[Any] = []
        for branch in self.branches:
            items = branch.state.get(key)
            for item in items if isinstance(items, list) else []:
                if (mark := _key(item)) not in seen:
                    seen.add(mark)
                    out.append(item)
        return out

    def report(self, chosen: Branch) -> dict[str, Any]:
        root = self.root
        visits = root.visits if root is not None else 0
        return SearchReport(
            strategy=self.settings.strategy, chosen=chosen.id, value=chosen.value,
            mean=root.mean if root is not None and visits else chosen.value, visits=visits,
            branches=[self._branch_report(b) for b in self.branches],
            restores=self.shared.restores if self.shared is not None else 0,
            stopped_at=self.solved.id if self.solved is not None else None,
        ).model_dump(mode="json")

    def _branch_report(self, b: Branch) -> BranchReport:
        diff = self._diffs.get(b.diff_id) if b.diff_id else None
        return BranchReport(id=b.id, parent=b.parent.id if b.parent else None, depth=b.depth, action=b.action,
                            value=b.value, mean=b.mean, visits=b.visits, terminal=b.done, error=b.error,
                            tests=_jsonable(read_path(b.state, self.settings.tests)), diff_id=b.diff_id,
                            diff=diff[:REPORT_DIFF_CHARS] if diff is not None else None)

    async def read_diffs(self) -> None:
        """Each branch's workspace diff as recorded at its last checkpoint (the runner records one per
        checkpoint of a run with a workspace and a folder), for the report."""
        if self.rt.run_dir is None:
            return
        from agentflow.graph.history import DIFF_KEY, DiffStore

        store = DiffStore(self.rt.run_dir)
        for branch in self.branches:
            if branch.thread is None:
                continue
            saved = await self.checkpointer().aget_tuple({"configurable": {"thread_id": branch.thread,
                                                                           "checkpoint_ns": ""}})
            digest = (saved.metadata or {}).get(DIFF_KEY) if saved is not None else None
            if digest:
                branch.diff_id = str(digest)
                if digest not in self._diffs:
                    self._diffs[str(digest)] = store.get(str(digest))


class BranchEvents:
    """The run's event log as a branch writes to it: every event names the search node and the branch."""

    def __init__(self, events: Any, search: str, branch: str) -> None:
        self._events = events
        self._tag = {"search": search, "branch": branch}
        self.ran: list[str] = []
        """The graph nodes the branch finished, in order (the step's label in the search tree)."""

    def emit(self, kind: str, /, *, node_id: str | None = None, parent_id: str | None = None, **data: Any) -> Any:
        if kind == "node.end" and node_id:
            self.ran.append(node_id)
        return self._events.emit(kind, node_id=node_id, parent_id=parent_id, **{**data, **self._tag})

    def write(self, event: Any) -> None:
        """Record an event the branch's step emitted elsewhere (on a worker node), tagged as `emit` tags."""
        if event.kind == "node.end" and event.node_id:
            self.ran.append(event.node_id)
        self._events.write(event.model_copy(update={"data": {**event.data, **self._tag}}))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._events, name)


def _release(path: list[Branch]) -> Callable[[Any], None]:
    """A done-callback taking back the virtual loss an expansion put on its path."""

    def done(_task: Any) -> None:
        for b in path:
            b.virtual -= 1

    return done


def _path(branch: Branch) -> list[Branch]:
    out: list[Branch] = []
    node: Branch | None = branch
    while node is not None:
        out.append(node)
        node = node.parent
    return out


def _jsonable(value: Any) -> Any:
    """A state value as JSON data (a pydantic model as its dump; anything else JSON cannot hold as text)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return json.loads(json.dumps(value, default=str))


def _key(value: Any) -> str:
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, sort_keys=True, default=str)


def _step_key(config: Mapping[str, Any]) -> str:
    conf = config["configurable"]
    return f"search-step:{conf['thread_id']}:{conf['checkpoint_id']}"


def search_node(
    name: str, node: NodeSpec, spec: WorkflowSpec, rt: RunContext, compile: Callable[..., Any]
) -> Callable[..., Any]:
    """The graph node that runs `node`'s search; `compile` compiles each branch's subgraph (compile.py calls
    this for a node with `search:`, passing its `compile_workflow`)."""
    configured = parse_search_settings(node.search, f"node '{name}'")
    output_key = node.output

    async def run(state: Any, config: RunnableConfig) -> dict[str, Any]:
        thread = str((config.get("configurable") or {}).get("thread_id", "")) or "run"
        values = dict(state) if isinstance(state, Mapping) else dict(vars(state))
        settings = strategy_for(configured, values, name)
        rt.start_node(name, type="search", strategy=settings.strategy)
        from agentflow.graph.search_remote import step_executor

        async with step_executor(settings, rt) as executor:
            search = SearchRun(name, node, spec, rt, settings, thread, compile, executor)
            chosen = await search.run(values)
        await search.read_diffs()
        search.finish(chosen)
        if search.shared is not None and chosen.snapshot is not None:
            await search.shared.restore(chosen.snapshot)  # the run goes on in the chosen branch's workspace
        updates = search.updates(chosen, values, output_key)
        rt.emit("node.end", node_id=name, type="search", writes=list(updates), chosen=chosen.id,
                branches=len(search.branches), value=chosen.value)
        return updates

    return run


__all__ = ["BRANCH_SEP", "READS", "STRATEGY_NAMES", "Branch", "BranchEvents", "BranchReport", "SearchReport",
           "SearchRun", "SearchSettings",
           "as_value", "branch_spec", "ignored_settings", "parse_search_settings", "read_path", "search_node",
           "settings_problems", "strategy_for"]
