"""`--executor`, `--ray-address`, `--task-cpus`: where `bench` and `eval` run their tasks (and `run` its search steps)."""

from __future__ import annotations

from typing import Any

import typer

EXECUTOR_OPTION: Any = typer.Option(
    None, "--executor", help="Where tasks run: in-process (default) or ray (each task a Ray task on a worker node)."
)
RAY_ADDRESS_OPTION: Any = typer.Option(
    None,
    "--ray-address",
    help="Ray cluster for --executor ray: HOST:PORT of its head, or auto (the one `ray start` runs here); "
    "default: a local Ray started for the command.",
)
TASK_CPUS_OPTION: Any = typer.Option(
    None, "--task-cpus", help="--executor ray: CPUs one task holds (a node runs its CPUs / this many at once)."
)


def executor_from_flags(kind: str | None, address: str | None, task_cpus: float | None) -> Any:
    """The `ExecutorConfig` the flags ask for, or None for the default (in this process)."""
    if kind is None and address is None and task_cpus is None:
        return None
    from agentflow.executors.base import executor_config

    return executor_config(kind, address, task_cpus=task_cpus)
