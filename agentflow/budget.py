"""One `Budget` shared by every agent, node and search in a run, nested runs included.

Limits are optional; usage is always counted. A child budget (`budget.child(...)`) charges its parent too,
so a nested run can have a tighter limit and still count against the whole run. The seconds of the model
calls that reached a model are counted too (`timed`): not a limit, the pace a plan of the rest goes by.

Limits are hard. A model or tool call is admitted before it starts (`model_call()` / `tool_call()`): it
holds one call (a model call also its `max_tokens`) until it ends, so concurrent callers cannot together
start more calls than the limit allows; a call is refused (`BudgetExceeded`) when a limit is already
reached, counting what the calls in flight hold. Tokens and USD are only known after a call: they are
charged then, and the next call is refused once they reach their limit. `deadline()` cuts a block at the
wall-clock limit (in-flight calls are cancelled). Charging never raises: step loops ask `exceeded()` (or
call `check()`) at their boundaries and stop cleanly with their best result.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Iterator
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


class CallTime(BaseModel):
    """Model calls that reached a model and the seconds they took (an answer served from a cache, the call
    journal or a cassette is not timed: its time says nothing of what the next call will take)."""

    calls: int = 0
    seconds: float = 0.0

    def mean_s(self) -> float | None:
        """Seconds per call; None before the first."""
        return self.seconds / self.calls if self.calls else None

    def add(self, other: CallTime) -> None:
        self.calls += other.calls
        self.seconds += other.seconds


class BudgetExceeded(AgentflowError):
    """Raised by `Budget.check()` when a limit is reached; `kind` says which."""

    def __init__(self, kind: BudgetKind, used: float, limit: float, *, refused: bool = False) -> None:
        self.kind = kind
        self.used = used
        self.limit = limit
        self.refused = refused
        """The call was refused before it started (it was never made), not cut while it ran."""
        super().__init__(f"budget exceeded: {kind} used {used:g} of {limit:g}")


class Budget:
    """Counts usage against limits; thread-safe and shared by reference."""

    def __init__(self, limits: BudgetLimits | None = None, *, parent: Budget | None = None, **kw: float | None) -> None:
        self.limits = limits or BudgetLimits.model_validate(kw)
        self.parent = parent
        self._used = BudgetUsage()
        self._held = BudgetUsage()
        """What calls in flight hold (admitted, not yet charged)."""
        self._start = time.monotonic()
        self._timed = CallTime()
        """The model calls charged with their seconds (`charge_call_time`); not a limit, the pace of the calls."""
        # One lock for a budget and all its children: admitting a call checks and holds at every level at once.
        self._lock: threading.RLock = parent._lock if parent is not None else threading.RLock()

    def child(self, limits: BudgetLimits | None = None, **kw: float | None) -> Budget:
        """A nested budget: its own limits, and every charge also counts against this one."""
        return Budget(limits or BudgetLimits.model_validate(kw), parent=self)

    @property
    def used(self) -> BudgetUsage:
        with self._lock:
            snap = self._used.model_copy()
        snap.wall_seconds = time.monotonic() - self._start
        return snap

    def _chain(self) -> Iterator[Budget]:
        """This budget, then its parents."""
        budget: Budget | None = self
        while budget is not None:
            yield budget
            budget = budget.parent

    def charge_model(self, *, tokens: int = 0, usd: float | None = 0.0, calls: int = 1) -> None:
        with self._lock:
            self._used.tokens += tokens
            self._used.usd += usd or 0.0
            self._used.model_calls += calls
        if self.parent is not None:  # through the parent's own method: it may count elsewhere (LedgerBudget)
            self.parent.charge_model(tokens=tokens, usd=usd, calls=calls)

    def charge_call_time(self, seconds: float) -> None:
        """One model call that reached a model took `seconds` (counted here and in every parent)."""
        with self._lock:
            for budget in self._chain():
                budget._timed.calls += 1
                budget._timed.seconds += seconds

    def timed(self) -> CallTime:
        """The model calls charged with their seconds so far (`charge_call_time`)."""
        with self._lock:
            return self._timed.model_copy()

    def charge_tool(self, calls: int = 1) -> None:
        with self._lock:
            for budget in self._chain():
                budget._used.tool_calls += calls

    def _reached(self, spends: tuple[BudgetKind, ...] = ()) -> tuple[BudgetKind, float, float] | None:
        """The first limit reached here or in a parent (kind, used, limit), or None; for the kinds a call
        `spends`, what calls in flight hold counts as used."""
        for budget in self._chain():
            used = budget.used
            for kind in BUDGET_KINDS:
                limit = getattr(budget.limits, kind)
                value = getattr(used, kind) + (getattr(budget._held, kind) if kind in spends else 0)
                if limit is not None and value >= limit:
                    return kind, value, limit
        return None

    def exceeded(self) -> BudgetKind | None:
        """The first limit reached here or in a parent, or None."""
        reached = self._reached()
        return reached[0] if reached is not None else None

    def check(self) -> None:
        """Raise `BudgetExceeded` if any limit (here or in a parent) is reached."""
        reached = self._reached()
        if reached is not None:
            raise BudgetExceeded(*reached)

    def remaining(self, kind: BudgetKind) -> float | None:
        """How much of `kind` is left (the tightest of this budget and its parents), None if unlimited."""
        left = [max(0.0, limit - getattr(budget.used, kind)) for budget in self._chain()
                if (limit := getattr(budget.limits, kind)) is not None]
        return min(left, default=None)

    def left(self) -> BudgetLimits:
        """What is left of each limit (here and in the parents), as the limits of a budget built elsewhere:
        a step run on another node runs under them and hands back what it used (`charge`)."""
        return BudgetLimits.model_validate({kind: self.remaining(kind) for kind in BUDGET_KINDS})

    def charge(self, used: BudgetUsage) -> None:
        """Charge what a step run elsewhere used (its own budget's `used`; its wall time is this run's too)."""
        if used.model_calls or used.tokens or used.usd:
            self.charge_model(tokens=used.tokens, usd=used.usd, calls=used.model_calls)
        if used.tool_calls:
            self.charge_tool(used.tool_calls)

    def carry(self, spent: BudgetUsage) -> None:
        """Count `spent` (earlier legs of a resumed run) here as if it had been charged, wall seconds included."""
        with self._lock:
            for kind in ("tokens", "usd", "model_calls", "tool_calls"):
                setattr(self._used, kind, getattr(self._used, kind) + getattr(spent, kind))
            self._start -= spent.wall_seconds

    def restart(self, spent: BudgetUsage | None) -> None:
        """Count exactly `spent` from now on (a run thread's own earlier usage; None: nothing), wall seconds
        included: the budget follows one thread of a run folder at a time. Calls in flight keep their holds."""
        spent = spent or BudgetUsage()
        with self._lock:
            self._used = spent.model_copy(update={"wall_seconds": 0.0})
            self._start = time.monotonic() - spent.wall_seconds

    def model_call(self, max_tokens: int | None = None) -> contextlib.AbstractContextManager[Hold]:
        """Admit one model call for the block: it holds one call and `max_tokens` (its most output tokens)
        against the limits here and in every parent until `hold.charge_model(...)` charges what it used or
        the block ends. Refused with `BudgetExceeded` when a limit is reached, counting what calls in flight
        hold of the model-call, token and USD limits."""
        held = BudgetUsage(model_calls=1, tokens=max_tokens or 0)
        return self._admit(("model_calls", "tokens", "usd"), held)

    def tool_call(self) -> contextlib.AbstractContextManager[Hold]:
        """Admit one tool call for the block (see `model_call`); `hold.charge_tool()` charges it."""
        return self._admit(("tool_calls",), BudgetUsage(tool_calls=1))

    @contextlib.contextmanager
    def _admit(self, spends: tuple[BudgetKind, ...], amount: BudgetUsage) -> Iterator[Hold]:
        """Check every level (see `_reached`), then hold `amount` at every level, both under the tree's one
        lock, until the block ends."""
        with self._lock:
            reached = self._reached(spends)
            if reached is not None:
                raise BudgetExceeded(*reached, refused=True)
            hold = Hold(self, amount)
        try:
            yield hold
        finally:
            hold.release()

    def _add_held(self, amount: BudgetUsage, sign: int) -> None:
        with self._lock:
            for budget in self._chain():
                for kind in ("model_calls", "tool_calls", "tokens"):
                    setattr(budget._held, kind, getattr(budget._held, kind) + sign * getattr(amount, kind))

    @contextlib.asynccontextmanager
    async def deadline(self, grace_s: float = 0.0) -> AsyncIterator[None]:
        """Cut the block at the wall-clock limit (the one here or in a parent that ends first), `grace_s`
        later: what it awaits is cancelled and `BudgetExceeded("wall_seconds")` raised. No limit: no cut."""
        wall = self._first_wall_limit()
        if wall is None:
            yield
            return
        budget, limit = wall
        left = _seconds_left(budget, limit)
        try:
            async with asyncio.timeout(left + grace_s) as scope:
                yield
        except TimeoutError:
            if not scope.expired():
                raise
            raise BudgetExceeded("wall_seconds", budget.used.wall_seconds, limit) from None

    def check_wall(self) -> None:
        """Raise `BudgetExceeded("wall_seconds")` once the wall-clock limit here or in a parent has passed (the
        other limits refuse the next call, not the next step: a run out of model calls still runs the steps
        that make none)."""
        wall = self._first_wall_limit()
        if wall is not None:
            _seconds_left(*wall)

    def _first_wall_limit(self) -> tuple[Budget, float] | None:
        """The budget (this one or a parent) whose wall-clock limit ends first, and that limit."""
        walls = [(budget, limit) for budget in self._chain() if (limit := budget.limits.wall_seconds) is not None]
        return min(walls, key=lambda wall: wall[1] - wall[0].used.wall_seconds, default=None)


class Hold:
    """What one admitted call holds of its budget until it is charged or released (`Budget.model_call`)."""

    def __init__(self, budget: Budget, amount: BudgetUsage) -> None:
        self.budget = budget
        self.amount = amount
        self._open = True
        budget._add_held(amount, +1)

    def release(self) -> None:
        """Give the held amount back (a call that failed or was cancelled is not charged). Idempotent."""
        with self.budget._lock:
            if self._open:
                self._open = False
                self.budget._add_held(self.amount, -1)

    def charge_model(self, *, tokens: int = 0, usd: float | None = 0.0, seconds: float | None = None) -> None:
        """The call ended: release what it held and charge what it used, at once; `seconds`: how long it took,
        when it reached a model (None: served from a cache or a cassette, not timed)."""
        with self.budget._lock:
            self.release()
            self.budget.charge_model(tokens=tokens, usd=usd, calls=1)
            if seconds is not None:
                self.budget.charge_call_time(seconds)

    def charge_tool(self) -> None:
        with self.budget._lock:
            self.release()
            self.budget.charge_tool()


class CallSlots:
    """Samples in flight against a budget's model-call limit, checked before a sample's own bookkeeping (its
    number, its candidate id) starts: a sample held here counts as spent until it ends. The model call itself
    is admitted by the budget too (`Budget.model_call`), which is what makes the limit exact."""

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
                                 self.budget.limits.model_calls or 0, refused=True)
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1


def _seconds_left(budget: Budget, limit: float) -> float:
    """Seconds before `budget` reaches its wall-clock `limit`; `BudgetExceeded` when none are left."""
    used = budget.used.wall_seconds
    if used >= limit:
        raise BudgetExceeded("wall_seconds", used, limit)
    return limit - used
