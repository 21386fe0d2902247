"""Search steps on an executor: best-of-N rollouts and MCTS expansions as Ray tasks (`executor: ray`).

A remote step gets the policy (pickled: it must hold no open connection; a policy that builds its model
from a spec on first use is fine), the node's state, its seed (the same `seed:node` string as in process, so
a replayed or simulated search gives the same tree) and the workspace as a snapshot shipped through the
object store. On the worker a `WorkspaceShipper` opens a fresh workspace, loads the snapshot and the step
runs there; the workspace it leaves comes back as a snapshot too and is loaded into a workspace of the
driver's pool, so verification, selection and the tree stay on the driver, exactly as in process.

Budget: a remote step runs under a budget of what the run has left when it starts and hands back what it
used (the usage the policy reported through its context); the driver charges the run's budget with it. Its
events are written into the driver's event log.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agentflow.budget import Budget, BudgetLimits
from agentflow.errors import UserError
from agentflow.events import Event, EventLog
from agentflow.executors.base import Executor, open_executor
from agentflow.executors.types import ExecutorConfig
from agentflow.search.protocols import Policy, RolloutContext, Workspace, WorkspacePool
from agentflow.search.types import Action, NodeState, SearchUsage

__all__ = ["RemoteSteps", "SandboxShipper", "SearchExecutor", "WorkspaceShipper", "remote_steps"]

SearchExecutor = Executor | ExecutorConfig | str | None
"""Where a search's steps run: None / "in-process" (here), "ray", an `ExecutorConfig`, or an open `Executor`."""


@runtime_checkable
class WorkspaceShipper(Protocol):
    """Moves workspace snapshots between the driver and worker nodes; itself pickled to the workers."""

    async def export(self, workspace: Workspace, snapshot_id: str) -> bytes:
        """The snapshot `snapshot_id` of `workspace` as bytes."""
        ...

    def open(self) -> contextlib.AbstractAsyncContextManager[Workspace]:
        """A fresh workspace at the search's base state (on a worker node)."""
        ...

    async def load(self, workspace: Workspace, blob: bytes) -> str:
        """Bring `workspace` to the exported state `blob`; return its snapshot id there."""
        ...


class SandboxShipper:
    """Ships sandbox workspaces as diffs against their base (the state `diff()` compares against: the
    search's start state). `setup` (a module-level async function) brings a fresh sandbox on the worker to
    that same base (e.g. seeds the repository); with no setup the base is an empty workspace."""

    def __init__(self, backend: str = "auto", config: Any = None,
                 setup: Callable[[Any], Awaitable[None]] | None = None) -> None:
        self.backend, self.config, self.setup = backend, config, setup

    async def export(self, workspace: Workspace, snapshot_id: str) -> bytes:
        await workspace.restore(snapshot_id)
        diff: str = await workspace.diff()  # type: ignore[attr-defined]
        return diff.encode()

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[Workspace]:
        from agentflow.sandbox import open_sandbox

        async with open_sandbox(self.backend, self.config) as sandbox:  # type: ignore[arg-type]
            if self.setup is not None:
                await self.setup(sandbox)
            yield sandbox

    async def load(self, workspace: Workspace, blob: bytes) -> str:
        # the sandbox's base (what its `diff()` compares against): the search's start, or a fresh sandbox as
        # `setup` left it; the shipped diff is relative to that same base on both sides
        base = getattr(workspace, "_base", None) or await workspace.snapshot()
        await workspace.restore(base)
        if blob.strip():
            result = await workspace.apply_patch(blob.decode())  # type: ignore[attr-defined]
            if not result.ok:
                raise RuntimeError(f"a shipped workspace did not apply: {result.output[-300:]}")
        return await workspace.snapshot()


@dataclass
class StepResult:
    """What a remote step hands back."""

    state: NodeState
    usage: SearchUsage
    events: list[Event] = field(default_factory=list)
    workspace: bytes | None = None


async def remote_step(policy: Policy, state: NodeState, action: Action | None, seed: str, node_id: str,
                      parent_id: str | None, limits: BudgetLimits, shipper: WorkspaceShipper | None,
                      blob: bytes | None, run_id: str) -> StepResult:
    """Runs on a worker: `policy.apply(state, action)` (or `policy.rollout(state)` without an action)."""
    events = EventLog(None, run_id=run_id)
    ctx = RolloutContext(rng=random.Random(seed), node_id=node_id, parent_id=parent_id, budget=Budget(limits),
                         events=events, charge_budget=True)

    async def run() -> NodeState:
        if action is not None:
            return await policy.apply(state, action, ctx)
        return await policy.rollout(state, ctx)

    if shipper is None:
        return StepResult(await run(), ctx.usage, events.events)
    async with shipper.open() as workspace:
        await workspace.restore(await shipper.load(workspace, blob or b""))
        ctx.workspace = workspace
        new = await run()
        shipped = await shipper.export(workspace, await workspace.snapshot())
    new.snapshot_id = None
    return StepResult(new, ctx.usage, events.events, shipped)


class RemoteSteps:
    """The driver's side: ships the start snapshot once per source, runs the step on `executor`, loads the
    returned workspace into the pool, replays events and charges the run's budget."""

    def __init__(self, executor: Executor, shipper: WorkspaceShipper | None = None) -> None:
        self.executor = executor
        self.shipper = shipper
        self._shipped: dict[str, Any] = {}

    async def _blob(self, pool: WorkspacePool | None, snapshot_id: str | None) -> Any:
        if self.shipper is None or pool is None or snapshot_id is None:
            return None
        if snapshot_id not in self._shipped:
            async with pool.acquire() as ws:
                self._shipped[snapshot_id] = self.executor.share(await self.shipper.export(ws, snapshot_id))
        return self._shipped[snapshot_id]

    async def step(self, policy: Policy, state: NodeState, action: Action | None, *, seed: str, node_id: str,
                   parent_id: str | None, budget: Budget | None, events: EventLog | None,
                   pool: WorkspacePool | None) -> tuple[NodeState, SearchUsage]:
        """One rollout (`action` None) or one apply, run on the executor; the new state and its usage."""
        blob = await self._blob(pool, state.snapshot_id)
        shipper = self.shipper if pool is not None else None
        limits = budget.left() if budget is not None else BudgetLimits()
        result: StepResult = await self.executor.call(
            remote_step, policy, state, action, seed, node_id, parent_id, limits, shipper, blob,
            events.run_id if events is not None else "", label=f"search:{node_id}")
        if events is not None:
            for event in result.events:
                events.write(event)
        if budget is not None:
            used = result.usage
            budget.charge_model(tokens=used.total_tokens, usd=used.cost_usd, calls=used.model_calls)
            if used.tool_calls:
                budget.charge_tool(used.tool_calls)
        if result.workspace is not None and pool is not None and self.shipper is not None:
            async with pool.acquire() as ws:
                result.state.snapshot_id = await self.shipper.load(ws, result.workspace)
        return result.state, result.usage


@contextlib.asynccontextmanager
async def remote_steps(executor: SearchExecutor, shipper: WorkspaceShipper | None) -> AsyncIterator[RemoteSteps | None]:
    """`RemoteSteps` on `executor` for one search run (an `ExecutorConfig` is opened and closed around it);
    None when the steps run in process."""
    if isinstance(executor, str):
        if executor not in ("in-process", "ray"):
            raise UserError(f"a search's executor must be in-process or ray, got {executor!r}")
        executor = ExecutorConfig(kind=executor)  # type: ignore[arg-type]
    if executor is None or (isinstance(executor, ExecutorConfig) and executor.kind == "in-process"):
        yield None
    elif isinstance(executor, ExecutorConfig):
        async with open_executor(executor) as opened:
            yield RemoteSteps(opened, shipper)
    else:
        yield RemoteSteps(executor, shipper) if executor.remote else None
