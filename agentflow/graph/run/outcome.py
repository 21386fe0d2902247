"""A node's failure as a typed outcome: routed to the node's `on_error:` target, or the end of the run.

An agent node that stops without a usable answer records `{node: NodeError}` under `node_errors` and goes to
its `on_error:` node, or raises `NodeFailed`; the runner then ends the run `failed`, naming the node, the
reason and the error (read back from the checkpoint, so a resumed run reports it too).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from agentflow.agents.result import limit_in, stop_text
from agentflow.budget import BudgetExceeded, BudgetKind
from agentflow.errors import NodeFailed

ERROR_CHANNEL = "__error__"
"""The pending-write channel LangGraph keeps a task's failure in (its `ERROR`, private since LangGraph 1.0)."""
NODE_ERRORS = "node_errors"
"""State key holding `{node: NodeError-as-dict or None}` in workflows with an `on_error:` route."""


class NodeError(BaseModel):
    """Why a node failed."""

    node: str
    """The node that failed."""
    reason: str
    """`error`, `step_limit`, `wall_time`, `budget:<kind>`, `no_output` (the agent ended without an answer)."""
    error: str = ""
    """The message, one line where possible."""
    limit: BudgetKind | None = None
    """The budget limit that stopped the node (reason `budget:<kind>`)."""


def error_from_exception(node: str, exc: BaseException | str) -> NodeError:
    """A NodeError for an exception a node raised (or the text LangGraph kept of it in the checkpoint)."""
    if isinstance(exc, NodeFailed):
        return NodeError(node=exc.node, reason=exc.reason, error=exc.error, limit=limit_in(exc.reason))
    if isinstance(exc, BudgetExceeded):
        return NodeError(node=node, reason=stop_text("budget", exc.kind), error=str(exc), limit=exc.kind)
    text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    if isinstance(exc, str) and "NodeFailed(" in exc:  # LangGraph keeps repr(exc) for a checkpointed failure
        inner = exc.split("NodeFailed(", 1)[1].rstrip(")\"'").strip("'\"")
        reason = _reason_in(inner)
        error = inner.removeprefix(f"node '{node}' failed ({reason})").removeprefix(": ")  # the message's own words
        return NodeError(node=node, reason=reason, error=error, limit=limit_in(reason))
    return NodeError(node=node, reason="error", error=" ".join(str(text).split())[:2000])


def one_line(exc: BaseException) -> str:
    """An exception as one line (a search branch's error): its first line, after its reason when it has one."""
    reason = getattr(exc, "reason", None)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{reason}: {text}" if reason else text


def _reason_in(message: str) -> str:
    start, end = message.find("("), message.find(")")
    return message[start + 1 : end] if 0 <= start < end else "error"


async def record_budget_stop(checkpointer: Any, snapshot: Any, exc: BudgetExceeded) -> None:
    """The run was cut at a budget limit while nodes ran: record each unfinished node of the last checkpoint
    as failed for that reason (`budget:<kind>`), in place of the cancellation LangGraph wrote there."""
    for task in getattr(snapshot, "tasks", ()) or ():
        written = f"{type(task.error).__name__}{task.error!r}"
        cut = task.error is None or "CancelledError" in written or "BudgetExceeded" in written
        if cut and not task.interrupts and task.result is None:
            failure = NodeFailed(task.name, stop_text("budget", exc.kind), str(exc))
            await checkpointer.aput_writes(snapshot.config, [(ERROR_CHANNEL, failure)], task.id)


def failed_tasks(snapshot: Any) -> dict[str, NodeError]:
    """Nodes whose last attempt raised, read from a LangGraph state snapshot (empty when none did)."""
    return {task.name: error_from_exception(task.name, task.error)
            for task in getattr(snapshot, "tasks", ()) or () if getattr(task, "error", None)}


def finished_tasks(snapshot: Any) -> list[str]:
    """Nodes of the snapshot's pending step that ended well (their writes are kept; a resume skips them)."""
    return [task.name for task in getattr(snapshot, "tasks", ()) or ()
            if not getattr(task, "error", None) and not task.interrupts and task.result is not None]


def recorded_errors(state: Any) -> dict[str, NodeError]:
    """Failures routed through `on_error:` and still standing (a later success of the node clears them)."""
    raw = state.get(NODE_ERRORS) if isinstance(state, Mapping) else getattr(state, NODE_ERRORS, None)
    return {k: NodeError.model_validate(v) for k, v in (raw or {}).items() if v}


def with_error_exit(node: str, on_error: str, normal: Callable[[Any], str] | str) -> Callable[[Any], str]:
    """A router out of `node`: to `on_error` when the node's last run failed, else the normal target."""

    def choose(state: Any) -> str:
        if node in recorded_errors(state):
            return on_error
        return normal(state) if callable(normal) else normal

    return choose


__all__ = ["NODE_ERRORS", "NodeError", "NodeFailed", "error_from_exception", "failed_tasks",
           "finished_tasks", "one_line", "record_budget_stop", "recorded_errors", "with_error_exit"]
