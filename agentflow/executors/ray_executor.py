"""The Ray executor: each call is a Ray task on a worker node; a small actor keeps the run's ledger.

Imported only when `--executor ray` is chosen (Ray is the optional extra `agentflow[ray]`). Placement, faults
and the run budget as users see them: docs/concepts/scale-out.md. Each start of a call is recorded in the
ledger, so the driver reports retries (`started_on(label)`). The actor lives on the driver's node, so losing
a worker node loses no spend.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar
from urllib.parse import urlparse

import ray
from ray import exceptions as ray_errors

from agentflow.budget import Budget, BudgetLimits, BudgetUsage
from agentflow.errors import AgentflowError, UserError
from agentflow.executors.types import ExecutorConfig, RemoteTaskError

T = TypeVar("T")
_LOST = (
    ray_errors.WorkerCrashedError, ray_errors.NodeDiedError, ray_errors.ObjectLostError, ray_errors.OwnerDiedError,
    ray_errors.RaySystemError, ray_errors.TaskUnschedulableError, ray_errors.TaskCancelledError,
)


class RayLedger:
    """Run-wide state shared by every node: USD spent and the starts of each call (for retry reports). One
    actor per run (`_LEDGER_ACTOR`), serving many calls at once."""

    def __init__(self, spent_usd: float = 0.0) -> None:
        self.usd = spent_usd
        self.starts: dict[str, list[str]] = {}

    def charge(self, usd: float) -> float:
        self.usd += usd
        return self.usd

    def total(self) -> float:
        return self.usd

    def started(self, label: str, node_id: str) -> int:
        self.starts.setdefault(label, []).append(node_id)
        return len(self.starts[label])

    def attempts(self, label: str) -> list[str]:
        return list(self.starts.get(label, []))


# ray.remote(...)'s typed keyword form takes task options only: the actor's options are given on creation
_LEDGER_ACTOR = ray.remote(RayLedger)
_LEDGER_OPTIONS: dict[str, Any] = {"num_cpus": 0, "max_concurrency": 64}


class LedgerBudget(Budget):
    """A USD limit shared by all nodes through the ledger actor (pickles to a worker as its handle + limit).
    Every read asks the actor (about a millisecond, once per model call), so no node acts on a stale total."""

    def __init__(self, ledger: Any, usd_limit: float) -> None:
        super().__init__(BudgetLimits(usd=usd_limit))
        self.ledger = ledger

    def __reduce__(self) -> tuple[Any, ...]:
        return (LedgerBudget, (self.ledger, self.limits.usd))

    def charge_model(self, *, tokens: int = 0, usd: float | None = 0.0, calls: int = 1) -> None:
        super().charge_model(tokens=tokens, usd=usd, calls=calls)
        if usd:
            ray.get(self.ledger.charge.remote(float(usd)))

    @property
    def used(self) -> BudgetUsage:
        """The usage of this budget, with the run-wide USD spent so far over all nodes."""
        snap = super().used
        snap.usd = float(ray.get(self.ledger.total.remote()))
        return snap


def _invoke(fn: Callable[..., Coroutine[Any, Any, Any]], ledger: Any, label: str, *args: Any) -> Any:
    """Body of every Ray task: record the start in the ledger, then run the coroutine function."""
    ray.get(ledger.started.remote(label, ray.get_runtime_context().get_node_id()))
    return asyncio.run(fn(*args))


def _init_on_loopback(**kwargs: Any) -> None:
    """Start a local Ray whose servers bind 127.0.0.1 only. Ray turns a loopback node address into the
    machine's outward one (and then listens on every interface); keeping it as given keeps Ray on loopback."""
    from ray._private import services

    resolve = services.resolve_ip_for_localhost
    services.resolve_ip_for_localhost = lambda host: host
    try:
        ray.init(**kwargs)
    finally:
        services.resolve_ip_for_localhost = resolve
    outward = [n["NodeManagerAddress"] for n in ray.nodes() if not _loopback(n["NodeManagerAddress"])]
    if outward:
        ray.shutdown()
        raise RuntimeError(f"the local Ray listens on {outward[0]}, not on loopback; start a cluster yourself "
                           "and pass --ray-address")


def _unpicklable(what: str, exc: TypeError) -> Exception:
    """Ray's report of a value it cannot pickle (a page of traversal output) as one line naming the object that
    refused; any other TypeError as it is."""
    text = str(exc)
    if not text.startswith("Could not serialize"):
        return exc
    cause = str(exc.__cause__ or "").strip()  # pickle's own error, when Ray kept it
    found = re.search(r"FAIL serialization: (.+)", text)
    reason = cause.splitlines()[0] if cause else found.group(1).strip() if found else text.splitlines()[0]
    return UserError(f"ray: {what} cannot be sent to a worker: {reason}",
                     hint="what a task takes must pickle: functions a worker can import, plain data, "
                          "no open connections, locks or clients")


def _loopback(address: str | None) -> bool:
    if address is None:
        return True
    host = urlparse(address if "://" in address else f"ray://{address}").hostname or ""
    return host == "localhost" or host.startswith("127.")


class RayExecutor:
    """Calls run as Ray tasks; see the module docstring. `start()` connects, `stop()` disconnects."""

    kind = "ray"
    remote = True

    def __init__(self, config: ExecutorConfig) -> None:
        self.config = config
        self._ledger: Any = None
        self._remote: Any = None
        self._options: dict[str, Any] = {}
        self._owned = True

    async def start(self) -> None:
        cfg = self.config
        self._owned = not ray.is_initialized()
        if not self._owned:  # inside a Ray task (a search in a bench task): use the job we are part of
            self._setup_tasks()
            return
        # nothing phones home: Ray's usage statistics stay off for the driver and a local Ray it starts
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
        if _loopback(cfg.address) and cfg.address != "auto":
            kwargs["_node_ip_address"] = "127.0.0.1"
        if cfg.address is None:
            kwargs["num_cpus"] = cfg.local_cpus
            kwargs["object_store_memory"] = cfg.local_object_store_mb * 2**20
        else:
            kwargs["address"] = cfg.address
            kwargs.pop("include_dashboard")
        try:
            await asyncio.to_thread(_init_on_loopback if cfg.address is None else ray.init, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = cfg.address or "a local Ray"
            raise UserError(f"cannot start or join Ray ({where}): {str(exc).splitlines()[0][:200]}",
                            hint="start the cluster with `ray start --head`, or check --ray-address") from None
        self._setup_tasks()

    def _setup_tasks(self) -> None:
        cfg = self.config
        node = ray.get_runtime_context().get_node_id()
        pin = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(node, soft=False)
        self._ledger = _LEDGER_ACTOR.options(**_LEDGER_OPTIONS, scheduling_strategy=pin).remote()
        options: dict[str, Any] = {"num_cpus": cfg.task_cpus, "max_retries": cfg.max_retries,
                                   "retry_exceptions": False, "scheduling_strategy": "SPREAD"}
        if cfg.task_memory_mb:
            options["memory"] = cfg.task_memory_mb * 2**20
        if cfg.task_resources:
            options["resources"] = dict(cfg.task_resources)
        self._options = options
        self._remote = ray.remote(_invoke)

    def stop(self) -> None:
        if self._owned and ray.is_initialized():
            ray.shutdown()
        elif self._ledger is not None:
            ray.kill(self._ledger)

    async def call(self, fn: Callable[..., Coroutine[Any, Any, T]], /, *args: Any, label: str = "") -> T:
        task = self._remote.options(name=label or fn.__name__, **self._options)
        try:
            ref = task.remote(fn, self._ledger, label, *args)
        except TypeError as exc:
            raise _unpicklable(f"the arguments of {label or fn.__name__}", exc) from None
        try:
            result: T = await ref
            return result
        except asyncio.CancelledError:
            ray.cancel(ref, force=True)
            raise
        except ray_errors.RayTaskError as exc:
            if isinstance(exc.cause, _LOST):
                raise self._lost(label, exc.cause) from None
            if isinstance(exc.cause, AgentflowError):  # a UserError stays one line; budget stops stay catchable
                raise exc.cause from None
            raise exc.as_instanceof_cause() from None  # a bug: keeps the worker's traceback
        except _LOST as exc:
            raise self._lost(label, exc) from None

    def _lost(self, label: str, exc: BaseException) -> RemoteTaskError:
        attempts = len(self.started_on(label))
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        return RemoteTaskError(f"ray: {label} was lost after {attempts} attempt(s) "
                               f"({self.config.max_retries} retries allowed): {exc.__class__.__name__}: {first}",
                               attempts=attempts)

    def share(self, value: Any, what: str = "a shared value") -> Any:
        try:
            return ray.put(value)
        except TypeError as exc:
            raise _unpicklable(what, exc) from None

    def run_budget(self, usd_limit: float | None, spent_usd: float = 0.0) -> Budget | None:
        if usd_limit is None:
            return None
        if spent_usd:
            ray.get(self._ledger.charge.remote(float(spent_usd)))
        return LedgerBudget(self._ledger, usd_limit)

    def started_on(self, label: str) -> list[str]:
        """Ids of the nodes the call with `label` was started on, in order (more than one: retried)."""
        nodes: list[str] = ray.get(self._ledger.attempts.remote(label))
        return nodes
