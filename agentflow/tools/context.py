"""What a tool can reach while it runs. A tool receives it by declaring a parameter typed `ToolContext`
(that parameter is left out of the tool's JSON schema).

`ToolContext[MyDeps]` types `ctx.deps`: the application's own handles (a database, a client), given to
`WorkflowRunner(spec, deps=...)`, `Agent(..., deps=...)` or `agent.run(task, deps=...)`, so tools reach them
without globals and tests pass fakes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

from agentflow.errors import ToolError

if TYPE_CHECKING:
    from agentflow.budget import Budget
    from agentflow.events import EventLog
    from agentflow.sandbox.base import Sandbox

DepsT = TypeVar("DepsT", default=Any)
"""The type of the dependencies a run carries (`Any` when a context is not parameterised)."""


@dataclass
class ToolContext(Generic[DepsT]):
    """Run-scoped handles passed to tools that ask for them."""

    sandbox: Sandbox | None = None
    """The sandbox that shell/editor/test tools act on (None for pure-Python tools)."""
    budget: Budget | None = None
    events: EventLog | None = None
    state: dict[str, Any] = field(default_factory=dict)
    """Per-run scratch space for tools (e.g. the editor's undo history), keyed by tool name."""
    deps: DepsT = None  # type: ignore[assignment]
    """The application's dependencies for this run (None when none were given)."""

    def require_sandbox(self) -> Sandbox:
        if self.sandbox is None:
            raise ToolError("this tool needs a sandbox, and the run has none (start one with --sandbox docker|local)")
        return self.sandbox
