"""`AgentResult`: what one agent run gives back."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agentflow.budget import BUDGET_KINDS, BudgetKind, BudgetUsage
from agentflow.models.base import Message


class StopReason(StrEnum):
    """Why an agent run stopped."""

    DONE = "done"
    STEP_LIMIT = "step_limit"
    WALL_TIME = "wall_time"
    ERROR = "error"
    LOOP = "loop"
    """A loop guard stopped a run that repeated itself."""
    CONTEXT = "context"
    """The conversation could not be made to fit the model's context window."""
    BUDGET = "budget"
    """A limit of the run's budget was reached: `AgentResult.limit` says which."""


def stop_text(reason: str, limit: BudgetKind | None = None) -> str:
    """A stop as it is printed and stored (events, state, run results, node failures): the reason, and for a
    budget stop the limit after it (`budget:usd`)."""
    return f"{StopReason.BUDGET}:{limit}" if limit is not None else str(reason)


def limit_in(text: str) -> BudgetKind | None:
    """The budget limit a stored `stop_text` names (a failure LangGraph kept as text in a checkpoint), or None."""
    reason, _, limit = text.partition(":")
    return next((kind for kind in BUDGET_KINDS if reason == StopReason.BUDGET and kind == limit), None)


ErrorKind = Literal["model_error", "bad_output", "output_cut", "limit", "loop"]
"""Why a run gave no usable answer: the model could not be reached or failed (`model_error`), its answer
did not parse as the schema (`bad_output`), the answer was cut by max_tokens (`output_cut`), or a step,
wall-time or budget limit ended the run (`limit`), or a loop guard stopped a run that repeated itself (`loop`)."""


class AgentResult(BaseModel):
    """The output of a run (or the best one so far when it stopped early), with why it stopped."""

    model_config = ConfigDict(arbitrary_types_allowed=True, use_attribute_docstrings=True)

    output: BaseModel | None
    """The final answer as the output schema; when the run stopped early, the latest earlier reply that
    parses as the schema, or None."""
    messages: list[Message]
    """The whole conversation, system prompt first."""
    steps: int
    """Model calls made."""
    stop_reason: StopReason
    """Why the run stopped; printed and stored as `stop` (`budget:<limit>` for a budget stop)."""
    limit: BudgetKind | None = None
    """Which limit of the budget stopped the run (`stop_reason` budget)."""
    usage: BudgetUsage = Field(default_factory=BudgetUsage)
    """Tokens, cost, model and tool calls and wall seconds of this run alone (nested runs included)."""
    error: str | None = None
    """What went wrong when `stop_reason` is `error`."""
    error_kind: ErrorKind | None = None
    """What kind of failure ended the run (None when it answered): branch on this, not on `error`'s text."""

    @property
    def ok(self) -> bool:
        return self.stop_reason is StopReason.DONE and self.output is not None

    @property
    def stop(self) -> str:
        """The stop as printed (`stop_text`): `done`, `step_limit`, ..., `budget:<limit>`."""
        return stop_text(self.stop_reason, self.limit)

    def failure(self) -> tuple[str, str] | None:
        """(reason, message) when the run gave no usable answer, else None: the reason is the stop reason,
        or `no_output` for a run that ended `done` without an answer."""
        if self.ok:
            return None
        reason = self.stop if self.stop_reason is not StopReason.DONE else "no_output"
        if self.error:
            message = self.error
        elif reason == "no_output":
            message = "the agent's final answer was empty"
        elif self.limit is not None:
            message = (f"the budget's {self.limit} limit stopped the agent after "
                       f"{self.steps} model calls made, without a final answer")
        else:
            message = f"the agent stopped after {self.steps} model calls without a final answer"
        return reason, message

    def summary(self) -> dict[str, object]:
        """A JSON-able digest for state, events and reports (no messages)."""
        return {
            "stop_reason": self.stop,
            "steps": self.steps,
            "usage": self.usage.model_dump(),
            "error": self.error,
            "error_kind": self.error_kind,
        }
