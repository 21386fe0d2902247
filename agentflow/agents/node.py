"""An agent as a graph node: an async callable `(state) -> state updates`, independent of LangGraph."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any

from agentflow.agents.agent import Agent
from agentflow.agents.result import AgentResult
from agentflow.budget import Budget
from agentflow.errors import NodeFailed, UserError
from agentflow.tools.context import ToolContext

if TYPE_CHECKING:
    from agentflow.tools.journal import ToolJournal


@dataclass(eq=False)
class AgentNode:
    """Reads the task from `state[input_key]` (or a dict of several keys), runs the agent and returns
    `{output_key: output as a JSON-able dict}`, plus `{result_key: run summary}` when asked. An agent that
    ends without a usable answer raises `NodeFailed` (node, reason, error), so the graph's run fails loudly;
    with `fail_on_error=False` it writes `{output_key: None}` and the summary says why instead."""

    agent: Agent
    _: KW_ONLY
    input_key: str | Sequence[str] = "task"
    output_key: str = ""
    """State key of the output ('': the agent's name)."""
    result_key: str | None = None
    ctx: ToolContext | None = None
    budget: Budget | None = None
    journal: ToolJournal | None = None
    journal_key: str = ""
    fail_on_error: bool = True

    def __post_init__(self) -> None:
        self.output_key = self.output_key or self.agent.name
        self.__name__ = self.agent.name  # graph libraries name nodes after their callables

    def task_from(self, state: Mapping[str, Any]) -> str | dict[str, Any]:
        if isinstance(self.input_key, str):
            if self.input_key not in state:
                raise UserError(f"agent node {self.agent.name!r}: state has no {self.input_key!r}",
                                hint=f"set input_key to one of {sorted(state)} or fill {self.input_key!r} "
                                     "before this node")
            value = state[self.input_key]
            return value if isinstance(value, str) else dict(value) if isinstance(value, Mapping) else str(value)
        return {key: state[key] for key in self.input_key if key in state and state[key] is not None}

    async def run(self, state: Mapping[str, Any]) -> AgentResult:
        """Run the agent on the task taken from `state` and return the full result."""
        return await self.agent.run(self.task_from(state), ctx=self.ctx, budget=self.budget, journal=self.journal,
                                    journal_key=self.journal_key)

    async def __call__(self, state: Mapping[str, Any]) -> dict[str, Any]:
        result = await self.run(state)
        failure = result.failure() if self.fail_on_error else None
        if failure is not None:
            raise NodeFailed(self.agent.name, *failure)
        output = result.output.model_dump(mode="json") if result.output is not None else None
        update: dict[str, Any] = {self.output_key: output}
        if self.result_key is not None:
            update[self.result_key] = {"agent": self.agent.name, **result.summary()}
        return update


agent_node = AgentNode
"""Wrap `agent` as an async `(state: dict) -> dict` node (see `AgentNode`)."""
