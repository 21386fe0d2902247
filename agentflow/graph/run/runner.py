"""Run, stream, pause and resume a compiled workflow against a durable checkpointer.

    runner = WorkflowRunner(spec, run_dir="runs/r1")
    result = await runner.start({"task": "..."})            # RunResult(status="done"|"interrupted", ...)
    result = await runner.resume(result.thread_id, approve=True)
    result = runner.run_sync({"task": "..."})                # the same from synchronous code
    async for ev in runner.stream({"task": "..."}, mode=["tokens", "tools"]):  # live events, any node
        ...
    history = await runner.history(result.thread_id)        # its checkpoints, oldest first
    forked = await runner.fork(result.thread_id, after_node="plan", update={"task": "..."})

The checkpointer is agentflow's SQLite saver by default (Postgres optional); with a `run_dir` the runner keeps
the run ledger there (`ledger.py`), from which a resume restores the workspace and the usage.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self, cast

from agentflow._sync import require_no_running_loop
from agentflow.budget import Budget, BudgetExceeded, BudgetKind, BudgetUsage
from agentflow.errors import DependencyMissing, UserError
from agentflow.events import Event
from agentflow.events.kinds import LimitReached, RunEnd, RunFork, RunResume, RunStart, WorkspaceRestored
from agentflow.graph.define.spec import WorkflowSpec
from agentflow.graph.run.context import RunHandles
from agentflow.graph.run.history import (
    CHECKPOINT_FILE,
    DIFF_KEY,
    GRAPH_KEY,
    CheckpointInfo,
    DiffStore,
    copy_database,
    pick_checkpoint,
    root_config,
    thread_history,
)
from agentflow.graph.run.ledger import SAVE_USAGE_ON, RunLedger, WorkspaceBase, WorkspaceJournal
from agentflow.graph.run.outcome import (
    NodeError,
    NodeFailed,
    error_from_exception,
    failed_tasks,
    finished_tasks,
    record_budget_stop,
    recorded_errors,
)
from agentflow.graph.run.streaming import LiveEvents, RunEvent, check_modes
from agentflow.graph.run.workspace import choose_backend, open_workspace, replay, workspace_diff
from agentflow.graph.search.settings import BRANCH_SEP, branch_path, subgraph_spec

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointMetadata

WALL_GRACE_S = 0.2
"""How long after the budget's wall-clock limit the run itself is cut (its calls are cut at the limit)."""


@dataclass
class StreamEvent:
    """One item of a run's LangGraph stream (`mode`: updates, custom, tasks or messages)."""

    mode: str
    namespace: tuple[str, ...]
    data: Any


RunStatus = Literal["done", "interrupted", "failed"]


@dataclass
class RunResult:
    """How a run (or one leg of it, up to a pause) ended."""

    thread_id: str
    status: RunStatus
    """`done` (reached END), `interrupted` (waits for approval) or `failed` (a node failed; see `errors`)."""
    state: dict[str, Any]
    interrupt: dict[str, Any] | None = None
    """What the run waits for: {node, message, state} (interrupt nodes) or {node, message} (interrupt_before)."""
    next: list[str] = field(default_factory=list)
    stop_reason: str = "done"
    """`done`, `interrupted`, or for a failed run the failed node's reason (`error`, `step_limit`, `budget:usd`...)."""
    limit: BudgetKind | None = None
    """The budget limit that stopped a failed run (its reason `budget:<limit>`)."""
    errors: dict[str, NodeError] = field(default_factory=dict)
    """Node -> why it failed: every failed node of the step that ended the run, and failures routed through
    `on_error:`."""
    finished: list[str] = field(default_factory=list)
    """A failed run: the nodes of the failed step that ended well (`resume` runs only the failed ones again)."""
    usage: BudgetUsage = field(default_factory=BudgetUsage)
    """Model and tool usage of this thread so far (with a run_dir: across the legs of a resumed run)."""
    exception: BaseException | None = field(default=None, repr=False)
    """The exception the failed node raised, when this process saw it."""

    @property
    def failed_node(self) -> str | None:
        """The node that ended a failed run, else None."""
        return next(iter(self.errors), None) if self.status == "failed" else None

    @property
    def ok(self) -> bool:
        return self.status == "done"


OnEvent = Callable[[StreamEvent], Awaitable[None] | None]


def open_checkpointer(target: str | Path | None, *, keep_last: int | None = 20) -> BaseCheckpointSaver[Any]:
    """`sqlite` / a file path -> AgentflowSaver; `postgres://...` -> LangGraph's PostgresSaver; `memory`."""
    text = str(target) if target is not None else "memory"
    if text == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        return InMemorySaver()
    if text.startswith(("postgres://", "postgresql://")):
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
            from psycopg import Connection
        except ImportError:
            raise DependencyMissing(
                "langgraph-checkpoint-postgres", "postgres", "a Postgres checkpointer"
            ) from None
        conn = Connection.connect(text, autocommit=True, prepare_threshold=0)
        saver = PostgresSaver(conn)
        saver.setup()
        return cast("BaseCheckpointSaver[Any]", saver)  # untyped to mypy where the optional package is absent
    from agentflow.graph.persist.checkpoint import AgentflowSaver

    return AgentflowSaver(text, keep_last=keep_last)


def _check_thread_id(thread_id: str) -> str:
    if BRANCH_SEP in thread_id:
        raise UserError(f"thread id {thread_id!r} contains {BRANCH_SEP!r}, which separates a search's branch threads",
                        hint="choose a thread id without it")
    return thread_id


class WorkflowRunner:
    """Runs one workflow; every run is a LangGraph thread in the checkpointer."""

    def __init__(
        self,
        spec: WorkflowSpec,
        *,
        run_dir: str | Path | None = None,
        checkpointer: BaseCheckpointSaver[Any] | str | Path | None = "sqlite",
        context: RunHandles | None = None,
        keep_last: int | None = 20,
        durability: Literal["sync", "async", "exit"] = "sync",
        sandbox: str | None = None,
        workspace: str | Path | None = None,
        deps: Any = None,
        ledger: bool = True,
    ) -> None:
        """`sandbox` (`docker`, `local`, `auto`, `none`; default: docker when a node's tools act on a sandbox
        or a `workspace` is given) is started on the first start or resume with a copy of `workspace`, and
        closed by `aclose()`; a sandbox you started goes in `context.sandbox`. `deps` reach function nodes as
        `ctx.deps` and tools as `ToolContext.deps`. With a `run_dir` and `ledger` the run ledger is kept
        there (`ledger.py`). Nothing starts (no model, no sandbox) until a run does."""
        from agentflow.graph.compile.compiler import compile_workflow

        self.spec = spec
        self._loop: asyncio.Runner | None = None  # the event loop of run_sync/resume_sync
        self._sandbox_request: tuple[str | None, str | Path | None] | None = (sandbox, workspace)
        self._sandbox_cm: Any = None
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.context = context or RunHandles()
        if deps is not None:
            self.context.deps = deps
        if self.context.budget is None:  # usage is always counted, so RunResult.usage says what a run cost
            self.context.budget = Budget()
        self.durability = durability
        self._owned: list[Any] = []
        if checkpointer == "sqlite":
            if self.run_dir is None:
                raise UserError("a SQLite checkpointer needs a run directory (run_dir=...)")
            checkpointer = self.run_dir / CHECKPOINT_FILE
        if checkpointer is None or isinstance(checkpointer, (str, Path)):
            checkpointer = open_checkpointer(checkpointer, keep_last=keep_last)
            self._owned.append(checkpointer)
        self.checkpointer = checkpointer
        self.context.checkpointer = checkpointer
        self.context.run_dir = self.run_dir
        self._branch_stamps: dict[str, str] = {}  # a branch's workspace snapshot -> its recorded diff's id
        self._thread_graphs: dict[str, str] = {}  # thread -> the search nodes (`a/b`) whose subgraph it runs
        self._graphs: dict[str, Any] = {}  # search-node path -> that subgraph, compiled
        if hasattr(checkpointer, "metadata_hook"):
            checkpointer.metadata_hook = self._stamp  # each checkpoint names its graph and the workspace's diff
        if self.context.journal is None and self.run_dir is not None:
            from agentflow.tools.journal import SqliteToolJournal

            self.context.journal = SqliteToolJournal(self.run_dir / CHECKPOINT_FILE)
            self._owned.append(self.context.journal)
        self.ledger = RunLedger(self.run_dir) if self.run_dir is not None and ledger else None
        self._usage_sink: Any = None
        self._thread: str | None = None  # the thread the budget counts now
        self._thread_usage: dict[str, BudgetUsage] = {}  # what each other thread this runner ran spent
        self._built_model: Any = None
        if self.ledger is not None:
            self._open_ledger(self.ledger)
        if spec.tools:
            from agentflow.tools.packs import load_pack

            for pack in spec.tools:
                for tool in load_pack(pack):
                    self.context.tools.setdefault(tool.name, tool)
        if spec.mcp_servers and self.context.mcp is None:
            from agentflow.mcp.hub import McpHub

            self.context.mcp = McpHub(spec.mcp_servers, events=self.context.events)
        self.graph = compile_workflow(spec, self.context, checkpointer)

    def _open_ledger(self, ledger: RunLedger) -> None:
        """events.jsonl, usage saved after each charge, the workspace kept before a tool call is journaled."""
        if self.context.events is None:
            from agentflow.rundir import RunDir

            self.context.events = RunDir(ledger.run_dir).events(ledger.run_id)
            self._owned.append(self.context.events)
        budget = self.context.budget
        sinks = getattr(self.context.events, "sinks", None)
        if isinstance(sinks, list):
            def save_usage(event: Event) -> None:  # usage.json as the thread's, after each charge
                if isinstance(event, SAVE_USAGE_ON):
                    ledger.save_usage(budget, self._thread)

            self._usage_sink = save_usage
            sinks.append(save_usage)
        if self.context.journal is not None and not isinstance(self.context.journal, WorkspaceJournal):
            self.context.journal = WorkspaceJournal(self.context.journal, self._keep_workspace)

    async def _keep_workspace(self, key: str = "") -> None:
        """Write the sandbox workspace's diff to patch.diff (not for a search branch: its own fork)."""
        if self.ledger is None or self.context.sandbox is None or BRANCH_SEP in key:
            return
        self.ledger.save_diff(await workspace_diff(self.context.sandbox))

    async def _restore_workspace(self) -> None:
        """On resume: the fresh sandbox gets the run's recorded diff, unless it holds it already."""
        recorded = self.ledger.diff() if self.ledger is not None else None
        if not recorded or self.context.sandbox is None:
            return
        if await workspace_diff(self.context.sandbox) != recorded:
            await replay(self.context.sandbox, recorded, reset=True)
            self.context.emit(WorkspaceRestored(bytes=len(recorded)))

    def _config(self, thread_id: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": thread_id}, "recursion_limit": self.spec.step_limit or 1000}

    async def start(
        self,
        inputs: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        on_event: OnEvent | None = None,
    ) -> RunResult:
        """Start a new thread from `inputs` (declared defaults fill the rest)."""
        from agentflow.graph.compile.compiler import initial_state

        thread_id = _check_thread_id(thread_id or uuid.uuid4().hex[:12])
        base = WorkspaceBase()  # its files are filled in as the sandbox loads the workspace
        await self._ensure_sandbox(base)
        if (await self.graph.aget_state(self._config(thread_id))).created_at is not None:
            raise UserError(f"thread {thread_id!r} already exists", hint="use --resume to continue it")
        if self.ledger is not None:
            self.ledger.begin(thread_id, self._workflow_ref())
            if base.files is not None:
                self.ledger.save_base(base)
        self.context.emit(RunStart(workflow=self.spec.name, thread_id=thread_id))
        return await self._drive(initial_state(self.spec, inputs or {}, self.context), thread_id, on_event)

    async def resume(
        self,
        thread_id: str,
        *,
        approve: bool | str = False,
        edit: Mapping[str, Any] | None = None,
        on_event: OnEvent | None = None,
    ) -> RunResult:
        """Continue a thread from its last checkpoint: after a crash, or past an interrupt (approve/edit). A tool
        call's approval binds to the call shown (its `call_hash`), or to the hash `approve` gives."""
        from langgraph.types import Command

        config = self._config(thread_id)
        path = await self._graph_path(thread_id)
        graph = self._graph_at(path)
        snapshot = await graph.aget_state(config)
        if snapshot.created_at is None:
            raise UserError(f"no checkpoint for thread {thread_id!r}", hint="check the thread id and the run directory")
        if not snapshot.next and not snapshot.tasks:
            # done; `next` alone would also be empty when the killed step's nodes all saved their writes but
            # the checkpoint after them was not written: that run is driven on (the writes applied, not rerun)
            return self._result(thread_id, snapshot)
        self.check_edit(edit, path)
        await self._ensure_sandbox()
        await self._restore_workspace()
        pending = [i for task in snapshot.tasks for i in task.interrupts]
        self.context.emit(RunResume(workflow=self.spec.name, thread_id=thread_id, approve=approve, edit=bool(edit)))
        at_breakpoint = bool(set(snapshot.next) & set(self._spec_at(path).interrupt_before))
        if (pending or at_breakpoint) and not approve and edit is None:
            shown = pending[0].value if pending else None
            node = shown.get("node") if isinstance(shown, dict) else snapshot.next[0]
            raise UserError(f"thread {thread_id!r} waits for approval {'at' if pending else 'before'} node '{node}'",
                            hint="pass --approve, or --edit JSON to change the state first")
        if pending:
            if edit is not None:
                answer = {"action": "edit", "updates": dict(edit)}
            else:
                answer = {"action": "approve", **_approved_call(pending[0].value, approve)}
            return await self._drive(Command(resume=answer), thread_id, on_event)
        if edit is not None:
            await graph.aupdate_state(config, dict(edit))
        return await self._drive(None, thread_id, on_event)

    def run_sync(self, inputs: Mapping[str, Any] | None = None, *, thread_id: str | None = None,
                 on_event: OnEvent | None = None) -> RunResult:
        """`start` for synchronous code; sync calls share one event loop, which `close()` ends."""
        return self._sync("run_sync", "runner.start(...)", lambda: self.start(inputs, thread_id=thread_id,
                                                                               on_event=on_event))

    def resume_sync(self, thread_id: str, *, approve: bool | str = False, edit: Mapping[str, Any] | None = None,
                    on_event: OnEvent | None = None) -> RunResult:
        """`resume` for synchronous code (see `run_sync`)."""
        return self._sync("resume_sync", "runner.resume(...)",
                          lambda: self.resume(thread_id, approve=approve, edit=edit, on_event=on_event))

    def _sync(self, name: str, instead: str, call: Callable[[], Coroutine[Any, Any, RunResult]]) -> RunResult:
        require_no_running_loop(f"WorkflowRunner.{name}", instead)
        if self._loop is None:  # one loop for every sync call: the sandbox and MCP servers live on it
            self._loop = asyncio.Runner()
        return self._loop.run(call())

    async def history(self, thread_id: str, *, source: str | Path | None = None) -> list[CheckpointInfo]:
        """The kept checkpoints of `thread_id`, oldest first; `source`: another run's directory to read."""
        async with self._source(source, thread_id) as (graph, _, _path):
            return await thread_history(graph, thread_id)

    async def fork(
        self,
        thread_id: str,
        *,
        checkpoint_id: str | None = None,
        after_node: str | None = None,
        update: Mapping[str, Any] | None = None,
        source: str | Path | None = None,
        new_thread_id: str | None = None,
        approve: bool = False,
        on_event: OnEvent | None = None,
    ) -> RunResult:
        """Continue a past run from one of its checkpoints as a new thread, with the workspace as it was there
        (docs/concepts/workflows.md). The checkpoint is `checkpoint_id` (a unique prefix), else the latest after
        `after_node` ran, else the latest; `update` is applied as `update_state` does; `source` is another
        run's directory (left as it was). Before an `interrupt_before` node the fork pauses unless `approve`.
        A search branch's thread (`THREAD~node~b3`) forks as a run of the subgraph that branch runs."""
        new_thread = _check_thread_id(new_thread_id or uuid.uuid4().hex[:12])
        config = self._config(new_thread)
        if await self.checkpointer.aget_tuple(root_config(new_thread)) is not None:
            raise UserError(f"thread {new_thread!r} already exists", hint="give the fork another thread id")
        async with self._source(source, thread_id) as (graph, store, path):
            point, diff = await self._pick(graph, store, path, thread_id, checkpoint_id, after_node, update)
            saved = await graph.checkpointer.aget_tuple(
                {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": point.checkpoint_id}}
            )
            if diff is not None and self.run_dir is not None:  # the fork's folder holds what its checkpoints name
                DiffStore(self.run_dir).put(diff)
        source_dir = source if source is not None else self.run_dir
        base = RunLedger(source_dir).base() if source_dir is not None else None
        if self.context.sandbox is not None or await self._ensure_sandbox(base) is not None:
            if diff is None:
                raise UserError(f"thread {thread_id!r} recorded no workspace at checkpoint {point.checkpoint_id}",
                                hint="fork a run that had a sandbox, written by this version with the sqlite "
                                "checkpointer, or run the fork without one (sandbox='none')")
            await replay(self.context.sandbox, diff, reset=True)  # the workspace as it was at the checkpoint
        origin = {"thread_id": thread_id, "checkpoint_id": point.checkpoint_id}
        metadata = {**saved.metadata, "forked_from": origin, **({GRAPH_KEY: path} if path else {})}
        self._thread_graphs[new_thread] = path
        if point.workspace_diff and self.context.sandbox is None:
            metadata[DIFF_KEY] = point.workspace_diff
        # Pending writes are left behind: the nodes after the checkpoint run again in the fork.
        await self.checkpointer.aput(root_config(new_thread), saved.checkpoint,
                                     cast("CheckpointMetadata", metadata), dict(saved.checkpoint["channel_versions"]))
        if self.ledger is not None:
            self.ledger.begin(new_thread, self._workflow_ref())
            if base is not None:
                self.ledger.save_base(base)  # the fork started from the same workspace, folder changes included
        self.context.emit(RunFork(workflow=self.spec.name, thread_id=new_thread, forked_from=origin, edit=bool(update)))
        graph = self._graph_at(path)
        if update:
            await graph.aupdate_state(config, dict(update))
        snapshot = await graph.aget_state(config)
        if not snapshot.next or (set(snapshot.next) & set(self._spec_at(path).interrupt_before) and not approve):
            return self._result(new_thread, snapshot)
        return await self._drive(None, new_thread, on_event)

    async def find_checkpoint(
        self, thread_id: str, checkpoint_id: str | None = None, *, after_node: str | None = None,
        source: str | Path | None = None, edit: Mapping[str, Any] | None = None,
    ) -> tuple[CheckpointInfo, str | None]:
        """The checkpoint `fork` would pick and the workspace diff recorded there (None without one); `edit`
        is checked as `fork` checks its update."""
        async with self._source(source, thread_id) as (graph, store, path):
            return await self._pick(graph, store, path, thread_id, checkpoint_id, after_node, edit)

    async def _pick(self, graph: Any, store: DiffStore | None, path: str, thread_id: str,
                    checkpoint_id: str | None, after_node: str | None,
                    edit: Mapping[str, Any] | None) -> tuple[CheckpointInfo, str | None]:
        self.check_edit(edit, path)
        point = pick_checkpoint(await thread_history(graph, thread_id), thread_id,
                                checkpoint_id=checkpoint_id, after_node=after_node)
        return point, store.get(point.workspace_diff) if store is not None and point.workspace_diff else None

    @contextlib.asynccontextmanager
    async def _source(self, source: str | Path | None, thread_id: str) -> AsyncIterator[tuple[Any, Any, str]]:
        """(graph, DiffStore or None, graph path) of `thread_id` in run folder `source` (read from a copy)."""
        if source is None or (self.run_dir is not None and Path(source).resolve() == self.run_dir.resolve()):
            path = await self._graph_path(thread_id)
            yield self._graph_at(path), (DiffStore(self.run_dir) if self.run_dir is not None else None), path
            return
        from agentflow.graph.compile.compiler import compile_workflow
        from agentflow.graph.persist.checkpoint import AgentflowSaver

        with tempfile.TemporaryDirectory(prefix="agentflow-fork-") as tmp:
            saver = AgentflowSaver(copy_database(Path(source) / CHECKPOINT_FILE, Path(tmp)), keep_last=None)
            try:
                path = await self._graph_path(thread_id, saver)
                yield compile_workflow(self._spec_at(path), self.context, saver), DiffStore(source), path
            finally:
                saver.close()

    def check_edit(self, edit: Mapping[str, Any] | None, graph_path: str = "") -> None:
        """An edit may set only keys the state declares; `graph_path`: of the subgraph the thread runs."""
        from agentflow.graph.check.validation import check_input
        from agentflow.graph.compile.compiler import registry_for

        if edit is not None:
            spec = self._spec_at(graph_path)
            check_input(spec, edit, "--edit sets", lambda: registry_for(spec, self.context))

    async def result(self, thread_id: str) -> RunResult:
        """Where thread `thread_id` stands, read from its last checkpoint without running anything."""
        snapshot = await (await self._graph_of(thread_id)).aget_state(self._config(thread_id))
        if snapshot.created_at is None:
            raise UserError(f"no checkpoint for thread {thread_id!r}", hint="check the thread id and the run directory")
        return self._result(thread_id, snapshot)

    async def stream(
        self,
        inputs: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        resume: bool = False,
        approve: bool = False,
        edit: Mapping[str, Any] | None = None,
        mode: str | Iterable[str] | None = None,
        nodes: Iterable[str] | None = None,
    ) -> AsyncIterator[RunEvent]:
        """Start a thread (or, with `resume`, continue `thread_id`) and yield its live `RunEvent`s, from any node
        and nested subgraph: `run.start` first, `run.end` last (its `result` the RunResult). `mode` keeps some of
        `tokens`, `models`, `tools`, `nodes`, `search`, `custom` (default: all); `nodes` keeps those nodes'
        events. Closing the generator early cancels the run (docs/concepts/workflows.md)."""
        live = LiveEvents(check_modes(mode), list(nodes) if nodes is not None else None)
        if resume and thread_id is None:
            raise UserError("stream(resume=True) needs the thread_id of the run to continue")
        thread = thread_id or uuid.uuid4().hex[:12]
        queue: asyncio.Queue[RunEvent | None] = asyncio.Queue()

        def on_event(event: StreamEvent) -> None:
            for item in live(event):
                queue.put_nowait(item)

        async def drive() -> None:
            try:
                if resume:
                    result = await self.resume(thread, approve=approve, edit=edit, on_event=on_event)
                else:
                    result = await self.start(inputs, thread_id=thread, on_event=on_event)
                queue.put_nowait(live.event("run.end", data={
                    "thread_id": thread, "status": result.status, "stop_reason": result.stop_reason,
                    "usage": result.usage.model_dump()}, result=result))
            finally:
                queue.put_nowait(None)

        yield live.event("run.start", data={"thread_id": thread, "workflow": self.spec.name, "resumed": resume})
        task = asyncio.ensure_future(drive())
        try:
            while (item := await queue.get()) is not None:
                yield item
            await task  # re-raises what the run raised (a UserError...)
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _drive(self, inputs: Any, thread_id: str, on_event: OnEvent | None) -> RunResult:
        from agentflow.graph.compile.agent_nodes import load_shared_model

        if self.context.chat_model is None:
            load_shared_model(self.spec, self.context)  # now that a run starts, not when the graph was compiled
            self._built_model = self.context.chat_model
        self._count_thread(thread_id)
        try:
            result = await self._stream(inputs, thread_id, on_event)
        finally:
            if self.context.mcp is not None:  # MCP servers live as long as one start/resume call
                await self.context.mcp.aclose()
            if self.ledger is not None:
                self.ledger.save_usage(self.context.budget, thread_id)
        if self.ledger is not None:
            await self._keep_workspace()
            self.ledger.update_record(status=result.status, stop_reason=result.stop_reason)
        return result

    def _count_thread(self, thread_id: str) -> None:
        """The budget counts `thread_id` from here: the first thread adds what it spent in earlier legs to an
        uncharged budget (a charged one is shared by its owner); another thread restarts it at what that thread
        spent before, so one thread's usage never counts against another's limits."""
        budget = self.context.budget
        if budget is None or thread_id == self._thread:
            return
        spent = self._recorded_usage(thread_id)
        if self._thread is None:
            used = budget.used
            if spent is not None and not (used.model_calls or used.tool_calls or used.tokens or used.usd):
                budget.carry(spent)
        else:
            self._thread_usage[self._thread] = budget.used
            budget.restart(spent)
        self._thread = thread_id

    def _usage_of(self, thread_id: str) -> BudgetUsage:
        """What thread `thread_id` has spent: the budget's count while it counts that thread, else the record."""
        if self.context.budget is not None and thread_id == self._thread:
            return self.context.budget.used
        return self._recorded_usage(thread_id) or BudgetUsage()

    def _recorded_usage(self, thread_id: str) -> BudgetUsage | None:
        """What thread `thread_id` spent while another thread counted, else in its earlier legs, or None."""
        recorded = self._thread_usage.get(thread_id)
        return recorded if recorded is not None or self.ledger is None else self.ledger.spent(thread_id)

    async def _stream(self, inputs: Any, thread_id: str, on_event: OnEvent | None) -> RunResult:
        config = self._config(thread_id)
        graph = await self._graph_of(thread_id)
        modes = ["updates", "custom", "messages", "tasks"] if on_event is not None else ["updates"]
        budget = self.context.budget
        # WALL_GRACE_S after the wall-clock limit: nodes cut at it by their own calls end with their own outcome
        deadline = budget.deadline(grace_s=WALL_GRACE_S) if budget is not None else contextlib.nullcontext()
        try:
            async with deadline:
                async for namespace, mode, data in graph.astream(
                    inputs, config, stream_mode=modes, subgraphs=True, durability=self.durability
                ):
                    if on_event is not None:
                        maybe = on_event(StreamEvent(mode=mode, namespace=tuple(namespace), data=data))
                        if maybe is not None:
                            await maybe
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - any node's exception is that node's failure, reported below
            from langgraph.errors import GraphRecursionError

            if isinstance(exc, GraphRecursionError):
                raise UserError(
                    f"workflow '{self.spec.name}' hit its step limit ({config['recursion_limit']} steps)",
                    hint="raise step_limit or check the loop's exit route",
                ) from None
            failure: BaseException | None = exc  # a node failed: the checkpoint names it; the run ends `failed`
        else:
            failure = None
        snapshot = await graph.aget_state(config)
        if isinstance(failure, BudgetExceeded):  # cut at the wall-clock limit: the checkpoint says why
            if self.context.events is not None:
                self.context.events.write(LimitReached(limit=failure.kind, cut=list(snapshot.next)))
            await record_budget_stop(self.checkpointer, snapshot, failure)
            snapshot = await graph.aget_state(config)
        result = self._result(thread_id, snapshot, failure)
        self.context.emit(RunEnd(
            thread_id=thread_id, status=result.status, next=result.next, stop_reason=result.stop_reason,
            errors={k: v.model_dump() for k, v in result.errors.items()}, finished=result.finished,
            usage=result.usage.model_dump(),
        ))
        return result

    def _result(self, thread_id: str, snapshot: Any, failure: BaseException | None = None) -> RunResult:
        values = dict(snapshot.values) if isinstance(snapshot.values, Mapping) else snapshot.values
        usage = self._usage_of(thread_id)
        routed = recorded_errors(values)
        failed = failed_tasks(snapshot)
        if failure is not None or failed:
            if failure is not None and not failed:  # not in the checkpoint (e.g. an in-memory run): from the exception
                node = getattr(failure, "node", None) or (snapshot.next[0] if snapshot.next else "?")
                failed = {node: error_from_exception(node, failure)}
            elif isinstance(failure, NodeFailed) and failure.node in failed:
                failed[failure.node] = error_from_exception(failure.node, failure)
            first = next(iter(failed.values()))
            return RunResult(
                thread_id=thread_id, status="failed", state=values, next=list(snapshot.next),
                stop_reason=first.reason, limit=first.limit, errors={**failed, **routed}, usage=usage, exception=failure,
                finished=finished_tasks(snapshot),
            )
        if not snapshot.next:
            return RunResult(thread_id=thread_id, status="done", state=values, errors=routed, usage=usage)
        pending = [i.value for task in snapshot.tasks for i in task.interrupts]
        info = pending[0] if pending and isinstance(pending[0], dict) else {
            "node": snapshot.next[0], "message": f"approve before running '{snapshot.next[0]}'"}
        return RunResult(
            thread_id=thread_id, status="interrupted", state=values, interrupt=info, next=list(snapshot.next),
            stop_reason="interrupted", errors=routed, usage=usage,
        )

    async def _stamp(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """Checkpoint metadata: on a fork of a search branch, the subgraph it runs; with a sandbox and a run folder,
        the workspace's diff (root namespace only: `fork` starts there)."""
        conf = config["configurable"]
        thread = str(conf.get("thread_id", ""))
        path = self._thread_graphs.get(thread)
        stamp = {GRAPH_KEY: path} if path and not conf.get("checkpoint_ns") else {}
        if self.context.sandbox is None or self.run_dir is None or conf.get("checkpoint_ns"):
            return stamp
        if BRANCH_SEP in thread:  # a search branch: its own fork of the workspace, not the sandbox as it is now
            branch = self.context.branch_workspaces.get(thread)
            if branch is None:
                return stamp
            known = self._branch_stamps.get(branch.snapshot_id)  # a node that left the files as they were
            if known is None:
                known = self._branch_stamps[branch.snapshot_id] = DiffStore(self.run_dir).put(
                    await workspace_diff(branch))
            return {**stamp, DIFF_KEY: known}
        diff = await workspace_diff(self.context.sandbox)
        if self.ledger is not None:  # the run's workspace so far, as of this checkpoint
            self.ledger.save_diff(diff)
        return {**stamp, DIFF_KEY: DiffStore(self.run_dir).put(diff)}

    async def _graph_path(self, thread_id: str, checkpointer: BaseCheckpointSaver[Any] | None = None) -> str:
        """The search nodes (`a/b`, "" for the workflow) whose subgraph thread `thread_id` runs: from a branch's
        id (`THREAD~a~b1~b4`), or from a fork's checkpoint metadata."""
        if BRANCH_SEP in thread_id:
            return "/".join(branch_path(thread_id))
        if checkpointer is None and thread_id in self._thread_graphs:
            return self._thread_graphs[thread_id]
        saved = await (checkpointer or self.checkpointer).aget_tuple(root_config(thread_id))
        path = str((saved.metadata or {}).get(GRAPH_KEY) or "") if saved is not None else ""
        if checkpointer is None and saved is not None:
            self._thread_graphs[thread_id] = path
        return path

    def _spec_at(self, path: str) -> WorkflowSpec:
        return subgraph_spec(self.spec, path.split("/")) if path else self.spec

    def _graph_at(self, path: str) -> Any:
        """The compiled graph of the search nodes' subgraph at `path` ("" : the workflow's)."""
        if not path:
            return self.graph
        if path not in self._graphs:
            from agentflow.graph.compile.compiler import compile_workflow

            self._graphs[path] = compile_workflow(self._spec_at(path), self.context, self.checkpointer)
        return self._graphs[path]

    async def _graph_of(self, thread_id: str) -> Any:
        return self._graph_at(await self._graph_path(thread_id))

    def _workflow_ref(self) -> str:
        """The workflow's file (absolute), else its name."""
        source = self.spec.source_path
        return str(Path(source).resolve()) if source and Path(source).is_file() else self.spec.name

    async def _ensure_sandbox(self, base: WorkspaceBase | None = None) -> Any:
        """The run's sandbox, started now when this runner is to start one; None without one. `base`: the
        workspace it is to hold (`load_workspace`)."""
        if self._sandbox_request is None or self.context.sandbox is not None:
            return self.context.sandbox
        requested, workspace = self._sandbox_request
        backend = choose_backend(requested, self.spec, workspace)
        if backend is None:
            return None
        self._sandbox_cm = open_workspace(backend, workspace, events=self.context.events, base=base)
        self.context.sandbox = await self._sandbox_cm.__aenter__()
        return self.context.sandbox

    def record_applied(self, patch: str) -> None:
        """Note in the ledger that `patch` (this run's diff) was applied to the workspace folder: a later fork
        takes it back out of its copy to start where this run started."""
        if self.ledger is not None:
            self.ledger.record_applied(patch)

    async def diff(self) -> str:
        """What the run's agents changed in the sandbox's workspace, as a unified diff."""
        if self.context.sandbox is None:
            raise UserError("this run has no sandbox", hint="pass sandbox= or workspace= to WorkflowRunner")
        return await workspace_diff(self.context.sandbox)

    async def aclose(self) -> None:
        """Close the sandbox and the model this runner started, then what `close` closes."""
        if self._sandbox_cm is not None:
            cm, self._sandbox_cm = self._sandbox_cm, None
            self.context.sandbox = None
            await cm.__aexit__(None, None, None)
        if self._built_model is not None:
            model, self._built_model = self._built_model, None
            if self.context.chat_model is model:
                self.context.chat_model = None
            await model.aclose()
        self.close()

    def close(self) -> None:
        """Close what the runner opened (the sandbox too, when a sync call started it)."""
        if self._loop is not None:
            loop, self._loop = self._loop, None
            loop.run(self.aclose())  # the sandbox belongs to that loop; aclose comes back here for the rest
            loop.close()
            return
        sinks = getattr(self.context.events, "sinks", None)
        if self._usage_sink is not None and isinstance(sinks, list) and self._usage_sink in sinks:
            sinks.remove(self._usage_sink)  # a log the caller keeps stops writing this run's usage
        self._usage_sink = None
        for item in self._owned:
            if (close := getattr(item, "close", None)) is not None:
                close()
        self._owned.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _approved_call(pending: Any, approve: bool | str) -> dict[str, Any]:
    """What binds an approval to a tool call: the hash named by the caller, else the one the interrupt shows."""
    if isinstance(approve, str):
        return {"call_hash": approve}
    shown = pending.get("call_hash") if isinstance(pending, Mapping) else None
    return {"call_hash": shown} if shown else {}
