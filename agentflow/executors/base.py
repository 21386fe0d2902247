"""Where a unit of work runs: in this process (the default) or on a Ray cluster.

An `Executor` runs `await fn(*args)` somewhere and hands the result back. `fn` is a module-level async
function and its arguments are plain data (pydantic models, str, bytes, dicts), so the same call can run
in this process or be pickled to a Ray worker node. Whatever the executor, the caller (the driver) keeps
the only write access to its run directory: a remote call returns what it produced and the driver writes it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Protocol, TypeVar, get_args, runtime_checkable

from agentflow.budget import Budget
from agentflow.config import validate_config
from agentflow.errors import UserError
from agentflow.executors.types import ExecutorConfig, ExecutorKind

T = TypeVar("T")
EXECUTOR_KINDS: tuple[str, ...] = get_args(ExecutorKind)


@runtime_checkable
class Executor(Protocol):
    """Runs module-level async functions on plain-data arguments and returns their results."""

    kind: str
    remote: bool
    """True when calls leave this process (results must then be written by the caller)."""

    async def call(self, fn: Callable[..., Coroutine[Any, Any, T]], /, *args: Any, label: str = "") -> T:
        """`await fn(*args)` on some worker (`fn` a coroutine function: a worker runs it in its own event loop);
        a lost call raises `RemoteTaskError`."""
        ...

    def share(self, value: Any, what: str = "a shared value") -> Any:
        """A handle for a large value passed to many calls (put once in Ray's object store; itself here); a
        value that cannot travel is a one-line UserError naming `what` it is."""
        ...

    def run_budget(self, usd_limit: float | None, spent_usd: float = 0.0) -> Budget | None:
        """A budget every call's budget charges as parent, enforced across all workers (None: no limit)."""
        ...

    def started_on(self, label: str) -> list[str]:
        """The nodes the call with `label` was started on, in order (more than one: it was retried after its
        worker or node died); empty in process."""
        ...


class InProcessExecutor:
    """The default: calls run as coroutines on this process's event loop."""

    kind = "in-process"
    remote = False

    async def call(self, fn: Callable[..., Coroutine[Any, Any, T]], /, *args: Any, label: str = "") -> T:
        return await fn(*args)

    def share(self, value: Any, what: str = "a shared value") -> Any:
        return value

    def run_budget(self, usd_limit: float | None, spent_usd: float = 0.0) -> Budget | None:
        if usd_limit is None:
            return None
        budget = Budget(usd=usd_limit)
        if spent_usd:
            budget.charge_model(usd=spent_usd, calls=0)
        return budget

    def started_on(self, label: str) -> list[str]:
        return []


def executor_config(
    kind: str | None = None, address: str | None = None, base: ExecutorConfig | None = None, **fields: Any
) -> ExecutorConfig:
    """An `ExecutorConfig` from command-line values, with one-line errors for bad ones."""
    data = base.model_dump() if base is not None else {}
    if kind is not None:
        if kind not in EXECUTOR_KINDS:
            raise UserError(f"--executor must be one of {', '.join(EXECUTOR_KINDS)}, got {kind!r}")
        data["kind"] = kind
    if address is not None:
        data["address"] = address
    data.update({k: v for k, v in fields.items() if v is not None})
    cfg = validate_config(ExecutorConfig, data, source="executor options")
    if cfg.address is not None and cfg.kind != "ray":
        raise UserError("--ray-address needs --executor ray", hint="add --executor ray or drop --ray-address")
    return cfg


@contextlib.asynccontextmanager
async def open_executor(config: ExecutorConfig | None = None) -> AsyncIterator[Executor]:
    """The executor `config` asks for; a Ray executor is connected on entry and disconnected on exit
    (a local Ray it started is stopped). Ray is imported only here, only for `kind: ray`."""
    config = config or ExecutorConfig()
    if config.kind == "in-process":
        yield InProcessExecutor()
        return
    try:
        from agentflow.executors.ray_executor import RayExecutor
    except ImportError as exc:
        if exc.name is None or not exc.name.startswith("ray"):
            raise
        raise UserError("--executor ray needs Ray", hint="pip install 'agentflow[ray]'") from None

    executor = RayExecutor(config)
    await executor.start()
    try:
        yield executor
    finally:
        executor.stop()
