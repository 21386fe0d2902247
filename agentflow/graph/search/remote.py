"""A search's steps on an executor: each branch step (best_of_n: a whole branch; the stepwise strategies: one
expansion) as a call on a worker node, e.g. a Ray task (`search: {executor: ray}`; docs/concepts/scale-out.md).

A step takes the branch's subgraph as data, the run's model spec, tools and deps, the branch's start, what
is left of the budget and the workspace snapshot it starts from (as git objects beyond the search's base).
It comes back with its checkpoints (put into the run's checkpointer under the branch's thread), events,
usage and workspace snapshots; values, selection and the tree stay with the search here.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Protocol

from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver

from agentflow.budget import Budget, BudgetLimits, BudgetUsage
from agentflow.errors import UserError
from agentflow.events import Event, EventLog
from agentflow.graph.compile.agent_nodes import load_shared_model
from agentflow.graph.compile.nodetypes import needed_resources, workflow_registry
from agentflow.graph.run.history import root_config
from agentflow.graph.run.outcome import one_line
from agentflow.graph.search.workspace import BranchSandbox, SharedSandbox, branch_sandbox

if TYPE_CHECKING:
    from agentflow.executors.base import Executor
    from agentflow.graph.define.spec import WorkflowSpec
    from agentflow.graph.run.context import RunHandles
    from agentflow.graph.search.settings import SearchSettings
    from agentflow.graph.search.tree import Branch


class SearchSide(Protocol):
    """What a search's remote steps read of the search they run for (the engine's `SearchRun`, which imports
    this module)."""

    name: str
    sub: WorkflowSpec
    rt: RunHandles
    compile: Callable[..., Any]
    mcp: list[Any]
    shared: SharedSandbox | None
    stepwise: bool

    def checkpointer(self) -> BaseCheckpointSaver[Any]: ...

    def interrupt_after(self) -> Any: ...


@contextlib.asynccontextmanager
async def step_executor(settings: SearchSettings, rt: RunHandles) -> AsyncIterator[Executor | None]:
    """Where a search's steps run: None in this process; else the run's remote executor, else one opened
    around the search (the run's Ray config, or a default Ray)."""
    from agentflow.executors.types import ExecutorConfig

    run = rt.executor
    kind = settings.executor or (run.kind if run is not None else "in-process")
    if kind == "in-process":
        yield None
        return
    if run is not None and not isinstance(run, ExecutorConfig) and run.remote:
        yield run
        return
    from agentflow.executors.base import open_executor

    config = run if isinstance(run, ExecutorConfig) and run.kind == "ray" else ExecutorConfig(kind="ray")
    async with open_executor(config) as opened:
        yield opened


@dataclasses.dataclass
class SandboxPlace:
    """How a worker opens a sandbox like the run's, and the search's base snapshot there."""

    backend: str
    config: Any
    base: str


@dataclasses.dataclass
class StepJob:
    """What every step of one search takes (put once into the executor's object store)."""

    spec: WorkflowSpec  # the branch's subgraph
    compile: Callable[..., Any]  # compile_workflow, by reference: the worker imports it
    interrupt_after: Any
    versions: Any  # the run checkpointer's class: the worker numbers channel versions as it does
    model: str | None
    chat_model: Any  # a model object the run was given (None: the worker builds one from `model`)
    tools: dict[str, Any]
    deps: Any
    node_types: Any
    mcp_servers: list[Any]
    sandbox: SandboxPlace | None
    run_id: str

    def parts(self) -> list[tuple[str, Any]]:
        """What the job carries that may not pickle, each named for the error that says so."""
        return [("the search's subgraph (its nodes and state class)", self.spec), ("the run's tools", self.tools),
                ("the run's deps", self.deps), ("the run's model object", self.chat_model),
                ("the run's node types", self.node_types)]


@dataclasses.dataclass
class Saved:
    """One checkpoint as data: what a checkpointer's `aput` and `aput_writes` take to write it again."""

    ns: str
    checkpoint: Checkpoint
    metadata: CheckpointMetadata
    parent_id: str | None
    writes: list[tuple[str, str, Any]]  # its pending writes: (task id, channel, value)
    workspace: str | None = None  # the snapshot the branch's workspace was at when it was written

    @property
    def id(self) -> str:
        return str(self.checkpoint["id"])

    @classmethod
    def of(cls, saved: CheckpointTuple, workspace: str | None = None) -> Saved:
        conf = saved.config["configurable"]
        parent = (saved.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        return cls(ns=conf.get("checkpoint_ns", ""), checkpoint=saved.checkpoint.copy(),
                   metadata=(saved.metadata or {}).copy(), parent_id=parent,
                   writes=[(w[0], w[1], w[2]) for w in saved.pending_writes or ()], workspace=workspace)


@dataclasses.dataclass
class StepStart:
    """One step of one branch."""

    thread: str
    sample: int
    siblings: int | None
    inputs: dict[str, Any] | None  # a new branch's input; None: go on from `checkpoint`
    checkpoint: Saved | None
    snapshot: str | None
    limits: BudgetLimits
    recursion_limit: int


@dataclasses.dataclass
class StepResult:
    """What a step hands back."""

    checkpoints: list[Saved]  # every checkpoint of the branch's thread on the worker, oldest first
    events: list[Event]
    usage: BudgetUsage
    error: str | None
    packs: list[tuple[str, bytes]] = dataclasses.field(default_factory=list)  # new snapshots as git objects
    workspace: str | None = None


class StepSaver(InMemorySaver):
    """A step's checkpoints on the worker, numbered as the run's are, with the workspace each was written at."""

    def __init__(self, versions: Any) -> None:
        super().__init__()
        self._versions = versions
        self.workspace: Any = None  # the step's BranchSandbox (None without a sandbox)
        self.at: dict[str, str] = {}  # checkpoint id -> workspace snapshot

    def get_next_version(self, current: Any, channel: None = None) -> Any:
        if self._versions is None or self._versions is InMemorySaver:
            return super().get_next_version(current, channel)
        return self._versions.get_next_version(self, current, channel)

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if self.workspace is not None:
            self.at[checkpoint["id"]] = self.workspace.snapshot_id
        return await super().aput(config, checkpoint, metadata, new_versions)


async def put_saved(saver: BaseCheckpointSaver[Any], thread: str, saved: Saved, *,
                    checkpoint: bool = True) -> None:
    """Write `saved` and its pending writes into `saver` under `thread` (`checkpoint=False`: the writes alone)."""
    conf = {"thread_id": thread, "checkpoint_ns": saved.ns}
    if checkpoint:
        versions = dict(saved.checkpoint["channel_versions"])  # all of them: the thread is new to this saver
        await saver.aput({"configurable": {**conf, "checkpoint_id": saved.parent_id}}, saved.checkpoint,
                         saved.metadata, versions)
    by_task: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for task_id, channel, value in saved.writes:
        by_task[task_id].append((channel, value))
    for task_id, writes in by_task.items():
        await saver.aput_writes({"configurable": {**conf, "checkpoint_id": saved.id}}, writes, task_id)


# -- the worker's side ------------------------------------------------------------------------------------------


async def run_step(job: StepJob, base_pack: bytes | None, start_pack: bytes | None, start: StepStart) -> StepResult:
    """Run one step of a branch here (on a worker), in a fresh sandbox at its workspace; what it wrote, as data."""
    from agentflow.graph.run.context import RunHandles

    events = EventLog(None, run_id=job.run_id)
    budget = Budget(start.limits)
    saver = StepSaver(job.versions)
    async with _workspace(job, base_pack, start_pack, start, events) as (sandbox, raw):
        saver.workspace = sandbox
        rt = RunHandles(events=events, budget=budget, tools=dict(job.tools), model=job.model,
                        chat_model=job.chat_model, sandbox=sandbox, node_types=job.node_types, checkpointer=saver,
                        branch=start.thread, sample=start.sample, siblings=start.siblings,
                        deps=job.deps)
        error = await _run_subgraph(job, start, rt, saver)
        saved = sorted([Saved.of(t, saver.at.get(t.checkpoint["id"]))
                        async for t in saver.alist({"configurable": {"thread_id": start.thread}})],
                       key=lambda s: (s.ns != "", s.id))
        result = StepResult(checkpoints=saved, events=list(events.events), usage=budget.used, error=error)
        if sandbox is not None:
            result.workspace = sandbox.snapshot_id
            result.packs = await _export(raw, [*(s.workspace for s in saved), result.workspace],
                                         have=[start.snapshot, job.sandbox.base if job.sandbox else None])
    return result


async def _run_subgraph(job: StepJob, start: StepStart, rt: RunHandles, saver: StepSaver) -> str | None:
    """The subgraph from the step's start to its next pause or its end; its error as one line, or None."""
    if job.mcp_servers:
        from agentflow.mcp.hub import McpHub

        rt.mcp = McpHub(job.mcp_servers, events=rt.events)
    try:
        if start.checkpoint is not None:
            await put_saved(saver, start.thread, start.checkpoint)
        load_shared_model(job.spec, rt)
        graph = job.compile(job.spec, rt, saver, interrupt_after=job.interrupt_after)
        config = {"configurable": {"thread_id": start.thread}, "recursion_limit": start.recursion_limit}
        await graph.ainvoke(start.inputs if start.checkpoint is None else None, config)
    except Exception as exc:  # noqa: BLE001 - the branch's failure, recorded by the search
        return one_line(exc)
    finally:
        if rt.mcp is not None:
            await rt.mcp.aclose()
        for model in rt.models.values():  # the models the step built (from the run's model spec)
            await model.aclose()
    return None


@contextlib.asynccontextmanager
async def _workspace(job: StepJob, base_pack: bytes | None, start_pack: bytes | None, start: StepStart,
                     events: EventLog) -> AsyncIterator[tuple[Any, Any]]:
    """A fresh sandbox like the run's at the step's start snapshot (the search's base as its diff base), as a
    `BranchSandbox` and as itself."""
    place = job.sandbox
    if place is None or start.snapshot is None:
        yield None, None
        return
    from agentflow.sandbox import start_sandbox

    sandbox = await start_sandbox(place.backend, place.config)  # type: ignore[arg-type]
    try:
        if base_pack:
            await sandbox.import_snapshot(place.base, base_pack)
        if start_pack:
            await sandbox.import_snapshot(start.snapshot, start_pack)
        await sandbox.restore(start.snapshot)
        await sandbox.set_base(place.base)
        sandbox.attach_events(events)  # the step's own commands from here
        shared = SharedSandbox(sandbox)
        shared.current = start.snapshot
        yield BranchSandbox(shared, start.snapshot), sandbox
    finally:
        await sandbox.close()


async def _export(sandbox: Any, snapshots: list[str | None], have: list[str | None]) -> list[tuple[str, bytes]]:
    """The git objects of each new snapshot beyond those the receiver holds (`have`, and the ones before it)."""
    held = [h for h in have if h]
    out: list[tuple[str, bytes]] = []
    for sid in snapshots:
        if sid and sid not in held:
            out.append((sid, await sandbox.export_snapshot(sid, held)))
            held.append(sid)
    return out


# -- the driver's side ------------------------------------------------------------------------------------------


class RemoteSteps:
    """A search's steps on `executor`: ships each step, puts back what it wrote (see the module docstring)."""

    def __init__(self, search: SearchSide, executor: Executor, job: Any, base: Any) -> None:
        self.search = search
        self.executor = executor
        self.job = job  # the shared handle of the StepJob
        self.base = base  # the shared handle of the base snapshot's objects (None without a sandbox)
        self.base_id: str | None = None
        self._starts: dict[str, Any] = {}

    @classmethod
    async def open(cls, search: SearchSide, executor: Executor, root: Branch) -> RemoteSteps:
        """Ship what every step of `search` takes: the job and the objects of the search's base snapshot."""
        rt = search.rt
        _check_portable(search)
        place = None
        shared = search.shared
        if shared is not None:
            sandbox = shared.sandbox
            if not hasattr(sandbox, "export_snapshot"):
                raise UserError(f"search node '{search.name}': executor {executor.kind} needs a sandbox whose "
                                f"snapshots can be shipped (docker or local), not {type(sandbox).__name__}")
            place = SandboxPlace(backend=str(sandbox.backend), config=sandbox.config,
                                 base=str(sandbox.base or root.snapshot))
        chat_model = rt.chat_model
        if chat_model is not None and any(chat_model is m for m in rt.models.values()):
            chat_model = None  # built from a spec: the worker builds its own
        job = StepJob(spec=search.sub, compile=search.compile,
                      interrupt_after=search.interrupt_after() if search.stepwise else None,
                      versions=type(search.checkpointer()), model=rt.model, chat_model=chat_model,
                      tools=dict(rt.tools), deps=rt.deps, node_types=rt.node_types, mcp_servers=list(search.mcp),
                      sandbox=place, run_id=str(getattr(rt.events, "run_id", "") or ""))
        handle = _share(executor, search.name, job)
        base = None
        if place is not None and shared is not None:
            async with shared.lock:
                base = executor.share(await shared.sandbox.export_snapshot(place.base), "the search's workspace")
        steps = cls(search, executor, handle, base)
        steps.base_id = place.base if place is not None else None
        return steps

    async def step(self, branch: Branch, rt: RunHandles, inputs: dict[str, Any] | None) -> str | None:
        """Run one step of `branch` on the executor and put back what it did; the branch's error, or None."""
        search = self.search
        assert branch.thread is not None
        saver = search.checkpointer()
        start_ckpt = None
        if inputs is None:
            found = await saver.aget_tuple(root_config(branch.thread))
            start_ckpt = Saved.of(found) if found is not None else None
        workspace = branch_sandbox(rt.sandbox)
        snapshot = workspace.snapshot_id if workspace is not None else None
        budget = search.rt.budget
        start = StepStart(thread=branch.thread, sample=branch.sample, siblings=rt.siblings, inputs=inputs,
                          checkpoint=start_ckpt, snapshot=snapshot,
                          limits=budget.left() if budget is not None else BudgetLimits(),
                          recursion_limit=search.sub.step_limit or 1000)
        result: StepResult = await self.executor.call(
            run_step, self.job, self.base, await self._start_pack(snapshot), start, label=f"search {branch.thread}")
        await self._put_back(result, branch, rt, start_ckpt)
        return result.error

    async def _start_pack(self, snapshot: str | None) -> Any:
        """The objects of the step's start snapshot beyond the base, shipped once per snapshot."""
        shared = self.search.shared
        if snapshot is None or shared is None or snapshot == self.base_id:
            return None
        if snapshot not in self._starts:
            async with shared.lock:
                pack = await shared.sandbox.export_snapshot(snapshot, [self.base_id])
            self._starts[snapshot] = self.executor.share(pack, "a branch's workspace")
        return self._starts[snapshot]

    async def _put_back(self, result: StepResult, branch: Branch, rt: RunHandles, start: Saved | None) -> None:
        """The step's workspace, usage, checkpoints and events into the run's."""
        search = self.search
        workspace = branch_sandbox(rt.sandbox)
        assert branch.thread is not None
        shared = search.shared
        if shared is not None and result.packs:
            async with shared.lock:
                for sid, pack in result.packs:
                    await shared.sandbox.import_snapshot(sid, pack)
        if search.rt.budget is not None:
            search.rt.budget.charge(result.usage)
        first = start.id if start is not None else ""
        late = [s.id for s in result.checkpoints if s.ns == "" and s.id != first and s.id < first]
        if late:  # checkpoint ids begin with their time: the latest must be the step's last, not its start
            raise UserError(f"search node '{search.name}': a worker's clock is behind this machine's (its checkpoint "
                            f"{late[0]} sorts before {first}); synchronise the clocks (NTP)")
        saver = search.checkpointer()
        for saved in result.checkpoints:
            if workspace is not None and saved.workspace is not None:
                workspace.snapshot_id = saved.workspace  # the runner names this workspace in the checkpoint
            await put_saved(saver, branch.thread, saved, checkpoint=saved.id != first)
        if workspace is not None and result.workspace is not None:
            workspace.snapshot_id = result.workspace
        if rt.events is not None:
            for event in result.events:
                rt.events.write(event)


def _check_portable(search: SearchSide) -> None:
    """Typed nodes that need the run's resources (a repair task's workbench) cannot run elsewhere."""
    if not any(node.type for node in search.sub.nodes.values()):
        return
    needs = needed_resources(search.sub, workflow_registry(search.sub, search.rt.node_types))
    if needs:
        raise UserError(f"search node '{search.name}': its subgraph's typed nodes need the run's "
                        f"{', '.join(sorted(needs))}, which stays in this process",
                        hint="run this search in process (search.executor: in-process)")


def _share(executor: Executor, search: str, job: StepJob) -> Any:
    """`job` in the executor's object store; a one-line UserError naming the part that does not pickle."""
    try:
        return executor.share(job, f"search node '{search}'s steps")
    except UserError:
        for what, part in job.parts():
            try:
                executor.share(part, what)
            except UserError as exc:
                raise UserError(f"search node '{search}': {exc}") from None
        raise


__all__ = ["RemoteSteps", "Saved", "StepJob", "StepResult", "StepSaver", "put_saved", "run_step", "step_executor"]
