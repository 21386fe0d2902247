"""One `Budget` shared by every agent, node and search in a run, nested runs included.

Limits are optional; usage is always counted. A child budget (`budget.child(...)`) charges its parent too,
so a nested run can have a tighter limit and still count against the whole run. Charging never raises:
callers ask `exceeded()` (or call `check()`) at their step boundaries and stop cleanly with their best result.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agentflow.errors import AgentflowError

BudgetKind = Literal["tokens", "usd", "model_calls", "tool_calls", "wall_seconds"]
BUDGET_KINDS: tuple[BudgetKind, ...] = ("tokens", "usd", "model_calls", "tool_calls", "wall_seconds")


class BudgetLimits(BaseModel):
    """Upper limits of a run; `None` means unlimited."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    tokens: int | None = Field(default=None, ge=0)
    """Total model tokens (input + output)."""
    usd: float | None = Field(default=None, ge=0)
    """Total model cost in US dollars (calls with unknown prices count as 0)."""
    model_calls: int | None = Field(default=None, ge=0)
    """Number of model calls (a call with n samples counts once)."""
    tool_calls: int | None = Field(default=None, ge=0)
    """Number of tool calls."""
    wall_seconds: float | None = Field(default=None, ge=0)
    """Wall-clock seconds since the budget was created."""


class BudgetUsage(BaseModel):
    """What has been used so far."""

    tokens: int = 0
    usd: float = 0.0
    model_calls: int = 0
    tool_calls: int = 0
    wall_seconds: float = 0.0


class BudgetExceeded(AgentflowError):
    """Raised by `Budget.check()` when a limit is reached; `kind` says which."""

    def __init__(self, kind: BudgetKind, used: float, limit: float) -> None:
        self.kind = kind
        self.used = used
        self.limit = limit
        super().__init__(f"budget exceeded: {kind} used {used:g} of {limit:g}")


class Budget:
    """Counts usage against limits; thread-safe and shared by reference."""

    def __init__(
        self,
        limits: BudgetLimits | None = None,
        *,
        parent: Budget | None = None,
        spent: BudgetUsage | None = None,
        **kw: float | None,
    ) -> None:
        """`spent` is usage carried over from earlier (a resumed run's spend so far): it counts against the
        limits as if it had been charged here, wall seconds included."""
        self.limits = limits or BudgetLimits.model_validate(kw)
        self.parent = parent
        self._used = spent.model_copy() if spent is not None else BudgetUsage()
        self._start = time.monotonic() - (spent.wall_seconds if spent is not None else 0.0)
        self._lock = threading.Lock()

    def child(self, limits: BudgetLimits | None = None, **kw: float | None) -> Budget:
        """A nested budget: its own limits, and every charge also counts against this one."""
        return Budget(limits, parent=self, **kw)

    @property
    def used(self) -> BudgetUsage:
        with self._lock:
            snap = self._used.model_copy()
        snap.wall_seconds = time.monotonic() - self._start
        return snap

    def charge_model(self, *, tokens: int = 0, usd: float | None = 0.0, calls: int = 1) -> None:
        with self._lock:
            self._used.tokens += tokens
            self._used.usd += usd or 0.0
            self._used.model_calls += calls
        if self.parent is not None:
            self.parent.charge_model(tokens=tokens, usd=usd, calls=calls)

    def charge_tool(self, calls: int = 1) -> None:
        with self._lock:
            self._used.tool_calls += calls
        if self.parent is not None:
            self.parent.charge_tool(calls)

    def exceeded(self) -> BudgetKind | None:
        """The first limit reached here or in a parent, or None."""
        used = self.used
        for kind in BUDGET_KINDS:
            limit = getattr(self.limits, kind)
            if limit is not None and getattr(used, kind) >= limit:
                return kind
        return self.parent.exceeded() if self.parent is not None else None

    def check(self) -> None:
        """Raise `BudgetExceeded` if any limit (here or in a parent) is reached."""
        kind = self.exceeded()
        if kind is None:
            return
        budget: Budget | None = self
        while budget is not None:
            limit = getattr(budget.limits, kind)
            if limit is not None and getattr(budget.used, kind) >= limit:
                raise BudgetExceeded(kind, getattr(budget.used, kind), limit)
            budget = budget.parent
        raise BudgetExceeded(kind, 0, 0)  # pragma: no cover - exceeded() and the walk agree

    def remaining(self, kind: BudgetKind) -> float | None:
        """How much of `kind` is left (the tightest of this budget and its parents), None if unlimited."""
        limit = getattr(self.limits, kind)
        mine = None if limit is None else max(0.0, limit - getattr(self.used, kind))
        theirs = self.parent.remaining(kind) if self.parent is not None else None
        if mine is None:
            return theirs
        return mine if theirs is None else min(mine, theirs)

    def carry(self, spent: BudgetUsage) -> None:
        """Count `spent` (earlier legs of a resumed run) here as if it had been charged, wall seconds included;
        as `Budget(spent=...)` does for a budget built for the resume."""
        with self._lock:
            self._used.tokens += spent.tokens
            self._used.usd += spent.usd
            self._used.model_calls += spent.model_calls
            self._used.tool_calls += spent.tool_calls
            self._start -= spent.wall_seconds

    def summary(self) -> dict[str, object]:
        return {"limits": self.limits.model_dump(exclude_none=True), "used": self.used.model_dump()}


class CallSlots:
    """Model calls in flight against a budget's model-call limit. Concurrent callers that each checked the
    budget before any of them was charged would together overshoot it; a call held here counts as spent until
    it ends (by then the model has charged it)."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.in_flight = 0

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """One call: refused (BudgetExceeded) when the limit cannot cover it and the calls already in flight."""
        self.budget.check()
        left = self.budget.remaining("model_calls")
        if left is not None and left - self.in_flight <= 0:
            raise BudgetExceeded("model_calls", self.budget.used.model_calls + self.in_flight,
                                 self.budget.limits.model_calls or 0)
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
