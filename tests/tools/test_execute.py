"""ToolRegistry.execute: validation, results, errors, timeouts, events, budget."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from pydantic import BaseModel

from agentflow.budget import Budget, BudgetExceeded
from agentflow.errors import ToolError
from agentflow.events import EventLog, read_events
from agentflow.models.base import ToolCall
from agentflow.tools import ToolContext, ToolRegistry, ToolResult, tool


def call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=f"call-{name}", name=name, arguments=arguments)


class Total(BaseModel):
    total: int
    items: list[int]


@tool
def add(a: int, b: int = 1) -> int:
    """Add two integers."""
    return a + b


@tool
async def total(items: list[int]) -> Total:
    """Sum a list."""
    await asyncio.sleep(0)
    return Total(total=sum(items), items=items)


@tool
def echo(text: str) -> str:
    """Return the text."""
    return text


@tool
def fail(kind: str) -> str:
    """Fail on purpose."""
    if kind == "tool":
        raise ToolError("the file does not exist; create it first")
    raise KeyError(kind)


@tool
def custom() -> ToolResult:
    """Return a ready-made result."""
    return ToolResult(ok=False, text="partial", data={"done": 3}, error="partial")


@tool
def nothing() -> None:
    """Return nothing."""


@tool
def whose_sandbox(ctx: ToolContext) -> str:
    """Report whether a sandbox is attached."""
    return f"state={sorted(ctx.state)}"


@tool
def needs_sandbox(ctx: ToolContext) -> str:
    """Use the sandbox."""
    ctx.require_sandbox()
    return "unreachable"


@tool
def spend(ctx: ToolContext) -> str:
    """Check the budget like a tool that calls a model would."""
    assert ctx.budget is not None
    ctx.budget.check()
    return "within budget"


REGISTRY = ToolRegistry([add, total, echo, fail, custom, nothing, whose_sandbox, needs_sandbox, spend])


async def test_valid_call_and_coercion() -> None:
    result = await REGISTRY.execute(call("add", a=2, b="40"))
    assert result.ok and result.text == "42" and result.data == {"result": 42} and result.error is None
    assert result.duration_s >= 0 and not result.replayed


async def test_validation_error_becomes_the_result_naming_the_argument() -> None:
    result = await REGISTRY.execute(call("add", a="two", c=1))
    assert not result.ok and result.error == "invalid arguments"
    assert result.text.startswith("ToolError: invalid arguments for tool 'add'")
    assert "'a'" in result.text and "'two'" in result.text
    assert "'c' is not a parameter" in result.text
    missing = await REGISTRY.execute(call("add"))
    assert "'a' is required" in missing.text


async def test_unknown_tool_and_unparsable_arguments_are_results() -> None:
    unknown = await REGISTRY.execute(call("subtract", a=1))
    assert not unknown.ok and "no tool named 'subtract'" in unknown.text and "add" in unknown.text
    bad_json = await REGISTRY.execute(ToolCall(id="x", name="add", arguments_error="Expecting ',' delimiter"))
    assert not bad_json.ok and "not valid JSON" in bad_json.text and "Expecting ','" in bad_json.text


async def test_structured_results() -> None:
    result = await REGISTRY.execute(call("total", items=[1, 2, 3]))
    assert result.ok and result.data == {"total": 6, "items": [1, 2, 3]}
    assert result.text == '{"total":6,"items":[1,2,3]}'
    ready = await REGISTRY.execute(call("custom"))
    assert (ready.ok, ready.text, ready.data, ready.error) == (False, "partial", {"done": 3}, "partial")
    empty = await REGISTRY.execute(call("nothing"))
    assert empty.ok and empty.text == "(no output)"


async def test_exceptions_become_tool_errors() -> None:
    model_facing = await REGISTRY.execute(call("fail", kind="tool"))
    assert not model_facing.ok
    assert model_facing.text == "ToolError: the file does not exist; create it first"
    crash = await REGISTRY.execute(call("fail", kind="other"))
    assert not crash.ok and crash.text == "ToolError: KeyError: 'other'" and crash.error == "KeyError"


async def test_context_is_injected_and_defaults_to_an_empty_one() -> None:
    ctx = ToolContext(state={"editor": {}})
    assert (await REGISTRY.execute(call("whose_sandbox"), ctx)).text == "state=['editor']"
    assert (await REGISTRY.execute(call("whose_sandbox"))).text == "state=[]"
    no_sandbox = await REGISTRY.execute(call("needs_sandbox"), ctx)
    assert not no_sandbox.ok and "needs a sandbox" in no_sandbox.text


async def test_budget_is_charged_per_call_and_budget_exceeded_propagates() -> None:
    budget = Budget(tool_calls=2)
    ctx = ToolContext(budget=budget)
    await REGISTRY.execute(call("add", a=1), ctx)
    await REGISTRY.execute(call("add", a="bad"), ctx)  # a rejected call still counts
    assert budget.used.tool_calls == 2
    with pytest.raises(BudgetExceeded) as info:
        await REGISTRY.execute(call("spend"), ctx)
    assert info.value.kind == "tool_calls"


async def test_async_tools_raising_budget_exceeded_propagate() -> None:
    @tool
    async def spend_async(ctx: ToolContext) -> str:
        """Async budget check."""
        assert ctx.budget is not None
        ctx.budget.check()
        return "ok"

    with pytest.raises(BudgetExceeded):
        await ToolRegistry([spend_async]).execute(
            call("spend_async"), ToolContext(budget=Budget(tool_calls=0))
        )


async def test_sync_tool_timeout() -> None:
    release = threading.Event()

    @tool(timeout=0.2)
    def stuck() -> str:
        """Block until released."""
        release.wait(30)
        return "late"

    try:
        result = await ToolRegistry([stuck]).execute(call("stuck"))
    finally:
        release.set()
    assert not result.ok and result.error == "timed out" and result.data == {"timed_out": True}
    assert "timed out after 0.2s" in result.text


async def test_async_tool_timeout_cancels_it() -> None:
    cancelled = asyncio.Event()

    @tool(timeout=0.2)
    async def slow() -> str:
        """Sleep too long."""
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    result = await ToolRegistry([slow]).execute(call("slow"))
    assert not result.ok and result.data.get("timed_out") is True
    assert cancelled.is_set()


async def test_a_timeout_error_raised_by_the_tool_is_not_a_timeout() -> None:
    @tool(timeout=30)
    def connects() -> str:
        """Fail like a socket would."""
        raise TimeoutError("connect timed out")

    result = await ToolRegistry([connects]).execute(call("connects"))
    assert not result.ok and result.error == "TimeoutError" and "connect timed out" in result.text


async def test_long_text_is_capped_head_and_tail_with_full_text_in_data() -> None:
    @tool(max_chars=1000)
    def long_output() -> str:
        """Print a lot."""
        return "HEAD" + "x" * 5000 + "TAIL"

    result = await ToolRegistry([long_output]).execute(call("long_output"))
    assert result.ok and len(result.text) < 1200
    assert result.text.startswith("HEAD") and result.text.endswith("TAIL")
    assert "characters cut" in result.text and str(result.data["cut_chars"]) in result.text
    assert result.data["full_text"] == "HEAD" + "x" * 5000 + "TAIL"


async def test_every_call_is_an_event_with_secrets_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-tools-test-0123456789"
    monkeypatch.setenv("EXAMPLE_API_KEY", secret)
    path = tmp_path / "events.jsonl"
    with EventLog(path, run_id="r1") as log:
        ctx = ToolContext(events=log)
        await REGISTRY.execute(call("echo", text=f"key is {secret}"), ctx, node_id="coder")
        await REGISTRY.execute(call("add", a="nope"), ctx)
    assert secret not in path.read_text()
    first, second = list(read_events(path))
    assert first.kind == second.kind == "tool.call"
    assert first.node_id == "coder" and first.run_id == "r1"
    assert first.data["name"] == "echo" and first.data["call_id"] == "call-echo"
    assert first.data["args"] == {"text": "key is ***"} and first.data["text"] == "key is ***"
    assert first.data["ok"] is True and first.data["replayed"] is False and first.data["duration_s"] >= 0
    assert second.data["ok"] is False and second.data["error"] == "invalid arguments"


async def test_concurrent_calls_run_side_by_side() -> None:
    gate = threading.Barrier(2, timeout=10)

    @tool(timeout=20)
    def meet(n: int) -> int:
        """Wait for the other call: only passes when both run at once."""
        gate.wait()
        return n

    registry = ToolRegistry([meet])
    results = await asyncio.gather(registry.execute(call("meet", n=1)), registry.execute(call("meet", n=2)))
    assert [r.text for r in results] == ["1", "2"] and all(r.ok for r in results)


def test_registry_bookkeeping() -> None:
    assert "add" in REGISTRY and len(REGISTRY) == 9 and REGISTRY.get("nope") is None
    sub = REGISTRY.subset(["echo", "add"])
    assert sub.names == ["echo", "add"] and [s.name for s in sub.specs()] == ["echo", "add"]
    from agentflow.errors import UserError

    with pytest.raises(UserError, match="unknown tool"):
        REGISTRY.subset(["missing"])

    @tool(name="add")
    def other_add(a: int) -> int:
        """Another add."""
        return a

    with pytest.raises(UserError, match="two tools are named 'add'"):
        ToolRegistry([add, other_add])
