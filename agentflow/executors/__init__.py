"""Where units of work run: in this process (default) or on a Ray cluster (`agentflow[ray]`) (layer 2).

`bench`, `eval` and search rollouts hand each task to an `Executor`; the driver alone writes the run
directory. Public names resolve lazily and Ray is imported only by `open_executor` for `kind: ray`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentflow._lazy import lazy_getattr

_LAZY: dict[str, str] = {
    "Executor": "agentflow.executors.base",
    "ExecutorConfig": "agentflow.executors.types",
    "InProcessExecutor": "agentflow.executors.base",
    "RemoteTaskError": "agentflow.executors.types",
    "executor_config": "agentflow.executors.base",
    "open_executor": "agentflow.executors.base",
    "pack_dir": "agentflow.executors.shipping",
    "unpack_dir": "agentflow.executors.shipping",
}

if TYPE_CHECKING:  # pragma: no cover
    from agentflow.executors.base import Executor, InProcessExecutor, executor_config, open_executor
    from agentflow.executors.shipping import pack_dir, unpack_dir
    from agentflow.executors.types import ExecutorConfig, RemoteTaskError

__getattr__ = lazy_getattr(__name__, _LAZY, globals())

__all__ = [
    "Executor", "ExecutorConfig", "InProcessExecutor", "RemoteTaskError", "executor_config", "open_executor",
    "pack_dir", "unpack_dir"
]
