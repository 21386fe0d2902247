"""Search over any workflow: a node whose `subgraph:` runs as the branches of a search (best_of_n, beam,
rebase, mcts; docs/concepts/search.md has the settings, the strategies and the report).

A *branch* is a real run of the subgraph, with its own thread of checkpoints in the run's checkpointer
(`<thread>~<search node>~<branch id>`; a search node that runs again in a loop names its later passes'
branches by the graph step they run in, `<thread>~<search node>~s<step>~<branch id>`) and its own fork of
the run's sandbox workspace (`BranchSandbox`). In the stepwise strategies an expansion copies the parent
branch's last checkpoint into a new thread and runs the subgraph on from there until the next step ends
(after a node named in `step_until`, or after any node).
Each step runs in this process or, with an executor, on a worker node (`remote.py`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel

from agentflow.events import Event
from agentflow.events.kinds import (
    BranchMoment,
    NodeEnd,
    SearchBranch,
    SearchDecision,
    SearchResume,
    SearchStop,
)
from agentflow.graph.compile.nodetypes import typed_keys, workflow_registry
from agentflow.graph.persist.checkpoint import newest_per_thread
from agentflow.graph.run.history import DIFF_KEY, DiffStore, root_config
from agentflow.graph.run.outcome import NodeFailed, one_line
from agentflow.graph.run.streaming import stream_writer
from agentflow.graph.search.remote import RemoteSteps, step_executor
from agentflow.graph.search.settings import (
    BRANCH_SEP,
    SearchSettings,
    ignored_settings,
    parse_search_settings,
    strategy_for,
)
from agentflow.graph.search.tree import (
    REPORT_DIFF_CHARS,
    Branch,
    BranchReport,
    SearchReport,
    as_value,
    branch_spec,
    read_path,
)
from agentflow.graph.search.workspace import BranchSandbox, SharedSandbox, branch_sandbox, end_processes

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointMetadata, CheckpointTuple

    from agentflow.graph.define.spec import NodeSpec, WorkflowSpec
    from agentflow.graph.run.context import RunHandles


class SearchStep(NamedTuple):
    """The graph step a search node runs in: its number (`langgraph_step`) and the checkpoint it started from."""

    number: int
    checkpoint: str | None


def search_step(config: RunnableConfig) -> SearchStep:
    """The step of the node `config` is given to (LangGraph's task config); no checkpoint without a checkpointer."""
    number = (config.get("metadata") or {}).get("langgraph_step")
    started = (config.get("configurable") or {}).get("checkpoint_map") or {}
    return SearchStep(number if isinstance(number, int) else 0,
                      str(list(started.values())[-1]) if started else None)  # the last: the graph running the node


class SearchRun:
    """One execution of a search node: the tree, the branches in flight, and the choice."""

    def __init__(self, name: str, node: NodeSpec, spec: WorkflowSpec, rt: RunHandles,
                 settings: SearchSettings, thread: str, compile: Callable[..., Any], executor: Any = None,
                 step: SearchStep | None = None) -> None:
        self.name = name
        self.compile = compile  # compile_workflow, passed in: the compiler imports this module
        self.executor = executor  # an open remote Executor the steps run on (None: in this process)
        self.remote: Any = None  # remote.RemoteSteps on `executor`, set up as the search starts
        self.sub = branch_spec(spec, node)
        self.mcp = list(spec.mcp_servers)
        self.parent_keys = set(spec.state) if spec.state else None
        self.rt = rt
        self.settings = settings
        self.thread = thread
        self.step = step or SearchStep(0, None)
        self.pass_part = ""  # "" on the node's first pass in this thread, else `s<step>` (`_choose_pass`)
        self.rng = random.Random(settings.seed)
        self.branches: list[Branch] = []
        self.slots = asyncio.Semaphore(settings.concurrency)
        self.shared: SharedSandbox | None = None
        self.stepwise = settings.strategy != "best_of_n"
        self._saver: BaseCheckpointSaver[Any] | None = None
        self.root: Branch | None = None
        self._ids = 0
        self._loaded: dict[str, list[Branch]] = {}  # parent id -> branches a killed run of this search made
        self.solved: Branch | None = None  # the first finished branch that reached `stop_at`
        self._diffs: dict[str, str] = {}  # diff id -> the diff's text (`read_diffs`)

    # -- the tree ---------------------------------------------------------------------------------------------

    def _new(self, parent: Branch) -> Branch:
        """A child of `parent`, in the tree before it runs (so concurrent selections see it)."""
        bid = f"b{self._ids}"
        self._ids += 1
        # a child's thread extends its parent's: the tree is in the thread ids, for a resumed search to rebuild
        prefix = parent.thread or self._pass_thread()
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

    def _pass_thread(self) -> str:
        """The prefix of this pass's branch threads (`T~node`, a later pass `T~node~s7`)."""
        base = f"{self.thread}{BRANCH_SEP}{self.name}"
        return f"{base}{BRANCH_SEP}{self.pass_part}" if self.pass_part else base

    def _label(self, branch: Branch) -> str:
        """The branch as events name it under the search node: its id, after its pass on a later pass (`s7/b0`)."""
        return f"{self.pass_part}/{branch.id}" if self.pass_part else branch.id

    def _node_id(self, branch: Branch) -> str:
        return self.name if branch.parent is None else f"{self.name}/{self._label(branch)}"

    def _emit(self, branch: Branch, *, final: bool | None = None, chosen: bool | None = None,
              select: str | None = None, tests: Any = None, diff: str | None = None) -> None:
        parent = self._node_id(branch.parent) if branch.parent is not None else None
        given = {"final": final, "chosen": chosen, "select": select, "tests": tests, "diff": diff}
        marks = {k: v for k, v in given.items() if v is not None}  # set only when given: the tree's final record
        self.rt.emit(branch.record(self.name, self.settings.strategy).model_copy(
            update={"node_id": self._node_id(branch), "parent_id": parent, **marks}))

    def finish(self, chosen: Branch) -> None:
        """The tree's final record (the last event of a node id wins): every node with its visits, the chosen
        one marked, each branch with its test result and diff as the report holds them (for the viewer)."""
        for branch in [self.root, *self.branches] if self.root is not None else self.branches:
            report = self._branch_report(branch) if branch.parent is not None else None
            self._emit(branch, final=True, chosen=True if branch is chosen else None,
                       select=self.settings.select if branch is chosen else None,
                       tests=report.tests if report is not None else None,
                       diff=report.diff if report is not None else None)

    # -- running one step of a branch -------------------------------------------------------------------------

    def _branch_context(self, branch: Branch) -> RunHandles:
        sandbox = BranchSandbox(self.shared, branch.snapshot or "") if self.shared is not None else None
        events = BranchEvents(self.rt.events, self.name, self._label(branch)) if self.rt.events is not None else None
        return dataclasses.replace(self.rt, sandbox=sandbox, events=cast(Any, events), branch=branch.thread,
                                   sample=branch.sample, siblings=self._siblings(branch), after_tool_call=None)

    def _siblings(self, branch: Branch) -> int | None:
        """How many children `branch`'s parent is given (`RunHandles.siblings`)."""
        s = self.settings
        if s.strategy == "best_of_n":
            return s.n
        if s.strategy == "rebase" or branch.parent is None:
            return None
        return s.expand_at(branch.parent.depth)

    def _graph(self, rt: RunHandles) -> Any:
        return self.compile(self.sub, rt, self.checkpointer(),
                            interrupt_after=self.interrupt_after() if self.stepwise else None)

    def _config(self, branch: Branch) -> dict[str, Any]:
        return {"configurable": {"thread_id": branch.thread}, "recursion_limit": self.sub.step_limit or 1000}

    async def _run_branch(self, branch: Branch, *, resumed: bool = False) -> Branch:
        """Run one step of `branch` from its parent's checkpoint and workspace (`resumed`: from its own)."""
        parent = branch.parent
        assert parent is not None and branch.thread is not None
        async with self.slots:
            if self.solved is not None:
                return self._drop(branch)
            t0 = time.perf_counter()
            forward = stream_writer()  # the run's live stream, taken here: the branch's graph has its own
            rt = self._branch_context(branch)
            workspace = branch_sandbox(rt.sandbox)
            graph = self._graph(rt)
            config = self._config(branch)
            self.rt.emit(SearchBranch(node_id=self._node_id(branch), search=self.name, parent=parent.id,
                                      event=BranchMoment.RESUME if resumed else BranchMoment.START))
            setup = time.perf_counter() - t0
            try:
                if not resumed and parent.thread is not None:
                    await self._copy_checkpoint(parent, branch)  # it names the parent's workspace already
                    setup = time.perf_counter() - t0
                # from here each checkpoint of the branch records the branch's workspace (the runner's hook)
                if workspace is not None:
                    self.rt.branch_workspaces[branch.thread] = workspace
                inputs = self._inputs(parent.state) if parent.thread is None and not resumed else None
                if self.remote is not None:
                    branch.error = await self.remote.step(branch, rt, inputs)
                else:
                    await self._invoke(graph, inputs, config, branch, forward)
            except Exception as exc:  # noqa: BLE001 - a branch's failure is that branch's, recorded below
                branch.error = one_line(exc)
            finally:
                self.rt.branch_workspaces.pop(branch.thread, None)
            snapshot = await graph.aget_state(config)
            branch.state = dict(snapshot.values) if isinstance(snapshot.values, Mapping) else {}
            branch.done = branch.error is None and not snapshot.next and not snapshot.tasks
            if branch.error is None and not branch.done:
                self._mark(snapshot.config)
            if workspace is not None:
                branch.snapshot = workspace.snapshot_id
            if isinstance(rt.events, BranchEvents):
                branch.action = " → ".join(rt.events.ran)
        raw = read_path(branch.state, self.settings.value)
        branch.value = 0.0 if branch.error else as_value(raw, self.settings.value_scale)
        branch.pending = False
        restores = getattr(rt.sandbox, "restore_seconds", None) or [0.0]
        self.rt.emit(SearchBranch(node_id=self._node_id(branch), event=BranchMoment.END, search=self.name,
                                  value=branch.value, terminal=branch.done, error=branch.error,
                                  setup_ms=round(setup * 1000, 2), restore_ms=round(restores[0] * 1000, 2)))
        self._emit(branch)
        self._check_solved(branch)
        return branch

    async def _invoke(self, graph: Any, inputs: Any, config: dict[str, Any], branch: Branch,
                      forward: Callable[[Any], None] | None) -> None:
        """Run the branch's step; its nodes' live stream goes on to the run's, `within` naming where it came from."""
        if forward is None:
            await graph.ainvoke(inputs, config)
            return
        async for namespace, chunk in graph.astream(inputs, config, stream_mode="custom", subgraphs=True):
            payload = dict(chunk) if isinstance(chunk, Mapping) else {"node": None, "chunk": chunk}
            inner = payload.get("within")
            payload["within"] = [self.name, self._label(branch), *(part.split(":", 1)[0] for part in namespace),
                                 *(inner if isinstance(inner, list) else [])]
            forward(payload)

    def _check_solved(self, branch: Branch) -> None:
        stop_at = self.settings.stop_at
        if stop_at is None or self.solved is not None or not branch.done or branch.error or branch.value < stop_at:
            return
        self.solved = branch
        self.rt.emit(SearchStop(node_id=self.name, search=self.name, branch=branch.id, value=branch.value,
                                stop_at=stop_at))

    def _expand(self, parent: Branch) -> Any:
        """A new child of `parent` run one step, or a child a killed run had made there (taken as it was when
        its step had finished, else continued)."""
        waiting = self._loaded.get(parent.id)
        if waiting:
            child = waiting.pop(0)
            self._attach(child)
            if child.pending:
                return self._run_branch(child, resumed=True)
            return self._taken(child)
        return self._run_branch(self._new(parent))

    async def _taken(self, branch: Branch) -> Branch:
        self.rt.emit(SearchBranch(node_id=self._node_id(branch), event=BranchMoment.REUSED, search=self.name,
                                  value=branch.value, terminal=branch.done))
        self._check_solved(branch)
        return branch

    def interrupt_after(self) -> Any:
        """Where a step ends: after the nodes `step_until` names, else after any node."""
        return list(self.settings.step_until) or "*"

    def checkpointer(self) -> BaseCheckpointSaver[Any]:
        """The run's checkpointer (an in-memory one for a run without: branches still pause and fork)."""
        if self.rt.checkpointer is not None:
            return self.rt.checkpointer
        if self._saver is None:
            from langgraph.checkpoint.memory import InMemorySaver

            self._saver = InMemorySaver()
        return self._saver

    def _inputs(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """The run's state cut to the keys of the subgraph's compiled schema (a new branch's input)."""
        if not self.sub.state:
            return dict(state)
        keys = set(self.sub.state)
        if any(node.type for node in self.sub.nodes.values()):
            keys.update(typed_keys(self.sub, workflow_registry(self.sub, self.rt.node_types)))
        return {k: v for k, v in state.items() if k in keys}

    async def _copy_checkpoint(self, parent: Branch, child: Branch) -> None:
        """The child's thread starts at the parent's last checkpoint (LangGraph's fork, into a new thread)."""
        saver = self.checkpointer()
        saved = await saver.aget_tuple(root_config(parent.thread))
        if saved is None:
            raise NodeFailed(self.name, "error", f"branch {parent.id} has no checkpoint to expand from")
        metadata = {**saved.metadata, "forked_from": {"thread_id": parent.thread, "search": self.name,
                                                      "checkpoint_id": saved.checkpoint["id"]}}
        await saver.aput(root_config(child.thread), saved.checkpoint, cast("CheckpointMetadata", metadata),
                         dict(saved.checkpoint["channel_versions"]))

    # -- strategies -------------------------------------------------------------------------------------------

    async def run(self, state: Mapping[str, Any]) -> Branch:
        if self.rt.sandbox is not None:
            self.shared = SharedSandbox(self.rt.sandbox)
        root = Branch(id="root", parent=None, thread=None, state=dict(state),
                      snapshot=await self.shared.snapshot() if self.shared is not None else None, depth=0,
                      pending=False)
        self.root = root
        self._emit(root)
        if self.executor is not None:
            self.remote = await RemoteSteps.open(self, self.executor, root)
        threads = await self._branch_threads()
        self.pass_part = self._choose_pass(threads)
        await self._load(root, threads)
        for text in ignored_settings(self.settings):
            self.decide(text)
        strategy = {"best_of_n": self._best_of_n, "beam": self._beam, "tot": self._beam,
                    "rebase": self._beam, "mcts": self._mcts}[self.settings.strategy]
        await strategy(root)
        self._say_why_ended()
        return self._choose()

    def _say_why_ended(self) -> None:
        """best_of_n and mcts searches that made fewer than `n` say what stopped them."""
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

    async def _branch_threads(self) -> dict[str, str]:
        """Every branch thread of this search node in the checkpointer (any pass) -> its newest checkpoint id."""
        base = f"{self.thread}{BRANCH_SEP}{self.name}{BRANCH_SEP}"
        newest: dict[str, str] = {}
        for saved in await newest_per_thread(self.checkpointer()):
            conf = saved.config["configurable"]
            if str(conf["thread_id"]).startswith(base):
                newest[str(conf["thread_id"])] = str(conf["checkpoint_id"])
        return newest

    def _choose_pass(self, threads: Mapping[str, str]) -> str:
        """"" when this is the node's first pass in the thread, else `s<step>` (the graph step it runs in, the
        same when a killed run resumes it). A pass is a later one when first-pass branches (`T~node~b3`) are
        older than the checkpoint its step started from (checkpoint ids grow with time): they belong to an
        earlier pass, whose branches this one must not take as its own."""
        started = self.step.checkpoint
        if started is None:
            return ""
        base = f"{self.thread}{BRANCH_SEP}{self.name}{BRANCH_SEP}"
        first_pass = [newest for thread, newest in threads.items()
                      if re.fullmatch(r"b\d+", thread.removeprefix(base))]
        return f"s{self.step.number}" if any(newest < started for newest in first_pass) else ""

    async def _load(self, root: Branch, threads: Mapping[str, str]) -> None:
        """The branches a killed run of this pass of the search left in the checkpointer (`pending`: their step
        unfinished)."""
        prefix = f"{self._pass_thread()}{BRANCH_SEP}"
        mine = sorted((t for t in threads if t.startswith(prefix)), key=lambda t: (t.count(BRANCH_SEP), t))
        by_thread: dict[str | None, Branch] = {None: root}
        graph = self._graph(self.rt)
        for thread in mine:
            parent_thread = thread.rsplit(BRANCH_SEP, 1)[0]
            parent = by_thread.get(parent_thread if parent_thread != prefix[:-1] else None)
            if parent is None:
                continue  # its parent is gone (pruned), or it is another pass's or an inner search's thread
            branch = await self._loaded_branch(graph, thread, parent)
            by_thread[thread] = branch
            self._loaded.setdefault(parent.id, []).append(branch)
            self._ids = max(self._ids, int(branch.id[1:]) + 1)
        for waiting in self._loaded.values():
            waiting.sort(key=lambda b: int(b.id[1:]))  # creation order: each takes its old place among siblings
        if len(by_thread) == 1:
            return
        self.rt.emit(SearchResume(node_id=self.name, branches=len(by_thread) - 1,
                                  finished=sum(1 for b in by_thread.values() if not b.pending and b is not root)))

    async def _loaded_branch(self, graph: Any, thread: str, parent: Branch) -> Branch:
        saved = await self.checkpointer().aget_tuple(root_config(thread))
        snapshot = await graph.aget_state({"configurable": {"thread_id": thread}})
        branch = Branch(id=thread.rsplit(BRANCH_SEP, 1)[1], parent=parent, thread=thread,
                        state=dict(snapshot.values) if isinstance(snapshot.values, Mapping) else {},
                        snapshot=parent.snapshot, depth=parent.depth + 1)
        branch.done = not snapshot.next and not snapshot.tasks
        branch.pending = not branch.done and not self._marked(saved)
        if not branch.pending:
            branch.value = as_value(read_path(branch.state, self.settings.value), self.settings.value_scale)
        if self.shared is not None:
            branch.snapshot = await self._workspace_at(self.shared, saved, parent)
        return branch

    def _mark(self, config: Mapping[str, Any]) -> None:
        """Note in the run's journal that the branch's step ended at this checkpoint (a resume takes it as it
        is). A kill between the checkpoint and the mark costs one step run again."""
        journal = self.rt.journal
        if journal is not None and hasattr(journal, "mark"):
            journal.mark(_step_key(config))

    def _marked(self, saved: CheckpointTuple | None) -> bool:
        journal = self.rt.journal
        return saved is not None and journal is not None and hasattr(journal, "marked") and journal.marked(
            _step_key(saved.config))

    async def _workspace_at(self, shared: SharedSandbox, saved: CheckpointTuple | None,
                            parent: Branch) -> str | None:
        """A snapshot of the workspace recorded at `saved` (base plus its diff), else the parent's."""
        digest = (saved.metadata or {}).get(DIFF_KEY) if saved is not None else None
        if not digest or self.rt.run_dir is None:
            return parent.snapshot
        sandbox = shared.sandbox
        diff = DiffStore(self.rt.run_dir).get(str(digest))
        async with shared.lock:
            await end_processes(sandbox)  # as before any branch's workspace is set up (workspace.py)
            if sandbox.base is not None:
                await sandbox.restore(sandbox.base)  # the run's workspace as loaded, then the branch's changes
            if diff:
                applied = await sandbox.apply_patch(diff)
                if not applied.ok:
                    raise NodeFailed(self.name, "error", f"a resumed branch's recorded workspace does not apply: "
                                     f"{applied.output[-300:]}")
            current = str(await sandbox.snapshot())
            shared.current = current
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
        """No tree node can take another child and expansions of `n` are left: the open node with the highest
        backed-up mean takes one more (a `search.decision` says so)."""
        s = self.settings
        open_nodes = [b for b in [root, *self.branches]
                      if not b.pending and b.error is None and not b.done and b.depth < s.max_depth]
        node = max(open_nodes, key=lambda b: (b.mean, -b.depth, -int(b.id[1:]) if b.parent else 1))
        self.decide(f"mcts: no tree node can take another child under expand={s.expand_at(node.depth)} "
                    f"({started} of n={s.n} expansions made); widening {node.id} (mean {node.mean:.2f}) to "
                    f"{len(node.children) + 1} children", widened=node.id)
        return node

    def decide(self, text: str, *, made: int | None = None, widened: str | None = None) -> None:
        """A choice its settings did not spell out: a `search.decision` event (printed by `agentflow run`)."""
        self.rt.emit(SearchDecision(node_id=self.name, search=self.name, decision=text, made=made, widened=widened))

    def _can_grow(self, node: Branch) -> bool:
        s = self.settings
        return (not node.pending and node.error is None and not node.done and node.depth < s.max_depth
                and len(node.children) < s.expand_at(node.depth))

    def _expandable(self, node: Branch) -> bool:
        return self._can_grow(node) or any(self._expandable(c) for c in node.children)

    # -- the choice -------------------------------------------------------------------------------------------

    def _choose(self) -> Branch:
        s = self.settings
        if not self.branches and self.root is not None:
            # none was made (the budget was spent before the first: `_say_why_ended` said so): the run goes on
            # with the state as it came, and the nodes after the search choose among what earlier ones made
            return self.root
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
        """The chosen branch's `outputs` (default: the keys it changed), `gather` keys, and the report."""
        keys = self.settings.outputs
        if keys is None:
            changed = (k for k, v in chosen.state.items() if k not in before or before[k] != v)
            keys = sorted(k for k in changed if self.parent_keys is None or k in self.parent_keys)
        out = {k: chosen.state.get(k) for k in keys if k in chosen.state}
        for key in self.settings.gather if self.branches else ():  # no branch: the state keeps its own lists
            out[key] = self.gathered(key)
        if output_key is not None:
            out[output_key] = self.report(chosen)
        return out

    def gathered(self, key: str) -> list[Any]:
        """The items of list `key` over every branch's state (failed ones' too), each item once."""
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
                            diff=diff[:REPORT_DIFF_CHARS] if diff is not None else None, thread=b.thread)

    async def read_diffs(self) -> None:
        """Each branch's workspace diff recorded at its last checkpoint, for the report."""
        if self.rt.run_dir is None:
            return
        store = DiffStore(self.rt.run_dir)
        for branch in self.branches:
            if branch.thread is None:
                continue
            saved = await self.checkpointer().aget_tuple(root_config(branch.thread))
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
        self.ran: list[str] = []  # the graph nodes the branch finished (the step's label in the tree)

    def write(self, event: Event) -> Event:
        """Record an event of the branch's step (also one emitted on a worker node), tagged."""
        if isinstance(event, NodeEnd) and event.node_id:
            self.ran.append(event.node_id)
        written: Event = self._events.write(event.model_copy(update=self._tag))
        return written

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
    name: str, node: NodeSpec, spec: WorkflowSpec, rt: RunHandles, compile: Callable[..., Any]
) -> Callable[..., Any]:
    """The graph node that runs `node`'s search; `compile` (compile_workflow) compiles each branch's subgraph."""
    configured = parse_search_settings(node.search, f"node '{name}'")
    output_key = node.output

    async def run(state: Any, config: RunnableConfig) -> dict[str, Any]:
        thread = str((config.get("configurable") or {}).get("thread_id", "")) or "run"
        values = dict(state) if isinstance(state, Mapping) else dict(vars(state))
        settings = strategy_for(configured, values, name)
        rt.start_node(name, node_type="search", strategy=settings.strategy)
        async with step_executor(settings, rt) as executor:
            search = SearchRun(name, node, spec, rt, settings, thread, compile, executor, search_step(config))
            chosen = await search.run(values)
        await search.read_diffs()
        search.finish(chosen)
        if search.shared is not None and chosen.snapshot is not None:
            await search.shared.restore(chosen.snapshot)  # the run goes on in the chosen branch's workspace
        updates = search.updates(chosen, values, output_key)
        rt.emit(NodeEnd(node_id=name, type="search", writes=list(updates), chosen=chosen.id,
                        branches=len(search.branches), value=chosen.value))
        return updates

    return run


__all__ = ["BranchEvents", "SearchRun", "search_node"]
