"""`@tool`: turn a typed, documented function (sync or async) into a `Tool` a model can call."""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
import sys
import time
from collections.abc import Callable
from typing import Any, overload

from pydantic import BaseModel, ValidationError

from agentflow.budget import BudgetExceeded
from agentflow.errors import ReplayMiss, ToolError
from agentflow.models.base import ToolSpec
from agentflow.tools.context import ToolContext
from agentflow.tools.result import DEFAULT_MAX_CHARS, ToolResult, to_result
from agentflow.tools.schema import build_args_model, json_schema

DEFAULT_TIMEOUT = 60.0
"""Seconds a tool may run unless `@tool(timeout=...)` says otherwise (None: no limit)."""

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # what OpenAI and Anthropic both accept
PACK_MODULE_PREFIX = "agentflow_packs."


class Tool:
    """A function a model can call: its name, JSON schema, argument validation, timeout and result shaping.

    Calling the `Tool` object directly calls the wrapped function unchanged (handy in tests).
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        max_chars: int | None = DEFAULT_MAX_CHARS,
        localns: dict[str, Any] | None = None,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        if not _NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-'")
        self.is_async = inspect.iscoroutinefunction(fn)
        self.timeout = timeout
        self.max_chars = max_chars
        self.args_model, self.context_param, self._param_names, doc = build_args_model(fn, self.name, localns)
        self.description = (description if description is not None else doc) or self.name
        self.pack = (getattr(fn, "__module__", "") or "").removeprefix(PACK_MODULE_PREFIX)
        self.spec = ToolSpec(name=self.name, description=self.description, parameters=json_schema(self.args_model))
        functools.update_wrapper(self, fn)

    def __repr__(self) -> str:
        return f"Tool({self.name!r}, pack={self.pack!r})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    @property
    def summary(self) -> str:
        """First line of the description."""
        return self.description.strip().splitlines()[0] if self.description.strip() else ""

    def validate(self, arguments: dict[str, Any]) -> BaseModel:
        """Validated arguments; raises pydantic's `ValidationError`."""
        return self.args_model.model_validate(arguments)

    def invalid_arguments(self, problems: list[str]) -> ToolResult:
        """The result of a call whose arguments are wrong: each problem, the parameters, what to do."""
        params = ", ".join(self.spec.parameters.get("properties", {})) or "none"
        return ToolResult.failure(
            f"invalid arguments for tool '{self.name}': {'; '.join(problems)}. "
            f"Parameters: {params}. Fix the arguments and call the tool again.",
            error="invalid arguments",
        )

    async def run(
        self, arguments: dict[str, Any], ctx: ToolContext | None = None, *, timeout: float | None = None
    ) -> ToolResult:
        """Validate, call with the timeout, and shape the result. Never raises for a tool's own failure;
        `BudgetExceeded`, `ReplayMiss` and cancellation propagate."""
        start = time.monotonic()
        try:
            values = self.validate(arguments)
        except ValidationError as exc:
            result = self.invalid_arguments(_problems(exc))
            result.duration_s = time.monotonic() - start
            return result
        kwargs = {param: getattr(values, field) for field, param in self._param_names.items()}
        if self.context_param is not None:
            kwargs[self.context_param] = ctx if ctx is not None else ToolContext()
        limit = timeout if timeout is not None else self.timeout
        try:
            call = self.fn(**kwargs) if self.is_async else asyncio.to_thread(self.fn, **kwargs)
            value = await asyncio.wait_for(call, limit)
            result = to_result(value, max_chars=self.max_chars)
        except (BudgetExceeded, ReplayMiss):
            raise
        except TimeoutError as exc:
            if limit is not None and time.monotonic() - start >= limit:
                # A sync tool's thread cannot be stopped: it finishes in the background, its result dropped.
                result = ToolResult.failure(
                    f"tool '{self.name}' timed out after {limit:g}s", error="timed out", timed_out=True
                )
            else:
                result = ToolResult.failure(f"TimeoutError: {exc}", error="TimeoutError")
        except ToolError as exc:
            result = ToolResult.failure(str(exc))
        except Exception as exc:  # noqa: BLE001 - a tool's failure is a result the model reads
            result = ToolResult.failure(f"{type(exc).__name__}: {exc}", error=type(exc).__name__)
        result.duration_s = time.monotonic() - start
        return result


def _problems(exc: ValidationError) -> list[str]:
    """What pydantic found wrong with the arguments, naming each argument (the first five)."""
    problems = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        if err["type"] == "missing":
            problems.append(f"'{loc}' is required")
        elif err["type"] == "extra_forbidden":
            problems.append(f"'{loc}' is not a parameter of this tool")
        else:
            problems.append(f"'{loc}': {err['msg']} (got {_short(err.get('input'))})")
    if exc.error_count() > 5:
        problems.append(f"and {exc.error_count() - 5} more")
    return problems


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    max_chars: int | None = DEFAULT_MAX_CHARS,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    max_chars: int | None = DEFAULT_MAX_CHARS,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a `Tool` of a sync or async function: `@tool` or `@tool(name=..., timeout=..., max_chars=...)`.

    The JSON schema comes from the type hints; the description from the docstring's summary, and each
    parameter's description from its `Args:` entry or `Annotated[..., Field(description=...)]`.
    """

    def wrap(f: Callable[..., Any], localns: dict[str, Any] | None = None) -> Tool:
        return Tool(f, name=name, description=description, timeout=timeout, max_chars=max_chars,
                    localns=localns if localns is not None else _caller())

    return wrap(fn, _caller()) if fn is not None else wrap


def _caller() -> dict[str, Any]:
    """Local names where `@tool` was applied, so string annotations naming a class defined inside a
    function (with `from __future__ import annotations`) still resolve."""
    return dict(sys._getframe(2).f_locals)
