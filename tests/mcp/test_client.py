"""Tools from MCP servers (the `mcp` SDK's client against a fixture server written with its server API):
listing, schema export, validation, capped untrusted results, environment, start failures and hangs."""

from __future__ import annotations

import shlex
import sys

import pytest

from agentflow.errors import UserError
from agentflow.models.base import ToolCall
from agentflow.tools.registry import ToolRegistry
from tests.mcp.conftest import STDIO_COMMAND

COMMAND = shlex.join(STDIO_COMMAND)


async def call(registry: ToolRegistry, name: str, **arguments: object):
    return await registry.execute(ToolCall(id="t", name=name, arguments=dict(arguments)))


async def test_stdio_tools_join_the_registry_with_schemas_and_validation() -> None:
    async with ToolRegistry() as registry:
        added = await registry.add_mcp(COMMAND, prefix="fx_", block=["fail"])
        assert [t.name for t in added] == [
            "fx_echo", "fx_add", "fx_whoami", "fx_record", "fx_big", "fx_stall", "fx_count"
        ]
        assert {t.pack for t in added} == {"mcp:fixture_server"}
        openai = next(t for t in registry.openai_tools() if t["function"]["name"] == "fx_add")
        assert openai["function"]["parameters"] == {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        }
        anthropic = next(t for t in registry.anthropic_tools() if t["name"] == "fx_add")
        assert anthropic["input_schema"] == openai["function"]["parameters"]

        ok = await call(registry, "fx_add", a=2, b=40)
        assert ok.ok and ok.text == "42" and ok.data["structured"] == {"result": 42}

        bad = await call(registry, "fx_add", a="two")
        assert not bad.ok and bad.error == "invalid arguments"
        assert "'b' is required" in bad.text and "'a': 'two' is not of type 'integer'" in bad.text
        assert bad.text.endswith("Fix the arguments and call the tool again.")
        assert "fx_fail" not in registry  # blocked


async def test_results_are_capped_and_server_errors_are_tool_errors() -> None:
    async with ToolRegistry() as registry:
        await registry.add_mcp(COMMAND, max_result_chars=500, max_result_bytes=20_000)
        big = await call(registry, "big", chars=100_000)
        assert big.ok and len(big.text) < 700 and "characters cut" in big.text
        assert len(big.data["full_text"]) < 20_200 and "more bytes from the MCP server dropped" in big.data["full_text"]
        assert "structured" not in big.data and big.data["structured_dropped_bytes"] > 100_000

        failed = await call(registry, "fail", message="no luck")
        assert not failed.ok and failed.text.startswith("ToolError: tool 'fail' failed on its server")


async def test_a_stdio_server_sees_only_the_environment_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIXTURE_SECRET", "host-secret")
    async with ToolRegistry() as registry:
        await registry.add_mcp(COMMAND)
        assert "secret=-" in (await call(registry, "whoami")).text
    async with ToolRegistry() as registry:
        await registry.add_mcp(COMMAND, pass_env=["FIXTURE_SECRET"])
        assert "secret=host-secret" in (await call(registry, "whoami")).text


@pytest.mark.parametrize(
    "command",
    [
        f"{sys.executable} -c 'import sys; sys.stderr.write(\"cannot open db\\n\"); sys.exit(3)'",
        "no-such-program-x1",
        "http://127.0.0.1:9/mcp",  # nothing listens on the discard port
    ],
)
async def test_a_server_that_fails_to_start_is_a_one_line_error_naming_the_command(command: str) -> None:
    registry = ToolRegistry()
    with pytest.raises(UserError) as info:
        await registry.add_mcp(command)
    message = str(info.value)
    assert "\n" not in message and "failed to start" in message and shlex.split(command)[0] in message
    if "cannot open db" in command:
        assert "cannot open db" in message  # the server's last words
    await registry.aclose()


async def test_a_hung_call_is_a_tool_error_and_the_next_call_gets_a_fresh_server() -> None:
    async with ToolRegistry() as registry:
        (stall,) = [t for t in await registry.add_mcp(COMMAND) if t.name == "stall"]
        first_pid = (await call(registry, "whoami")).text.split()[0]
        hung = await stall.run({"seconds": 30}, timeout=1)
        assert not hung.ok and "no answer within 1s" in hung.text and "restarted for the next call" in hung.text
        again = await call(registry, "whoami")
        assert again.ok and again.text.split()[0] != first_pid
        assert stall.connection.starts == 2


async def test_progress_tool_and_http_transport(http_fixture) -> None:
    async with ToolRegistry() as registry:
        await registry.add_mcp(http_fixture.url, prefix="h_")
        assert (await call(registry, "h_count", n=3)).text == "counted to 3"
        assert (await call(registry, "h_echo", text="over http")).text == "over http"


async def test_an_unknown_allowed_tool_is_a_user_error() -> None:
    registry = ToolRegistry()
    with pytest.raises(UserError, match="has no tool"):
        await registry.add_mcp(COMMAND, allow=["echo", "nope"])
    await registry.aclose()


async def test_a_server_that_died_between_calls_is_started_again_for_the_next_call() -> None:
    import asyncio
    import os
    import signal

    async with ToolRegistry() as registry:
        (echo, *_) = await registry.add_mcp(COMMAND)
        first_pid = int((await call(registry, "whoami")).text.split()[0].removeprefix("pid="))
        os.kill(first_pid, signal.SIGKILL)
        for _ in range(100):  # until the client has seen the end of the server's output
            if not echo.connection.running:
                break
            await asyncio.sleep(0.05)
        again = await call(registry, "echo", text="still here")
        assert again.ok and again.text == "still here" and echo.connection.starts == 2


async def test_concurrent_calls_share_one_server_and_a_hang_does_not_spoil_the_others() -> None:
    import asyncio

    async with ToolRegistry() as registry:
        tools = {t.name: t for t in await registry.add_mcp(COMMAND)}
        hung, *echoes = await asyncio.gather(
            tools["stall"].run({"seconds": 30}, timeout=2),
            *(call(registry, "echo", text=f"call {i}") for i in range(10)),
        )
        assert [e.text for e in echoes] == [f"call {i}" for i in range(10)]
        assert not hung.ok and tools["echo"].connection.starts == 1  # ten calls, one server
        after = await asyncio.gather(*(call(registry, "add", a=i, b=i) for i in range(5)))
        assert [r.text for r in after] == ["0", "2", "4", "6", "8"] and tools["echo"].connection.starts == 2


async def test_mcp_calls_are_charged_recorded_and_journaled_like_native_calls(tmp_path) -> None:
    from agentflow.budget import Budget
    from agentflow.events import EventLog
    from agentflow.tools import SqliteToolJournal, ToolContext

    record = tmp_path / "record.txt"
    budget = Budget(tool_calls=2)
    events = EventLog(None, run_id="t")
    ctx = ToolContext(budget=budget, events=events)
    with SqliteToolJournal(tmp_path / "journal.db") as journal:
        await charged(journal, ctx, budget, events, record)


async def charged(journal, ctx, budget, events, record) -> None:
    from agentflow.budget import BudgetExceeded

    async with ToolRegistry() as registry:
        await registry.add_mcp({"command": STDIO_COMMAND, "env": {"FIXTURE_RECORD_FILE": str(record)}})
        done = ToolCall(id="1", name="record", arguments={"label": "once"})
        first = await registry.execute(done, ctx, journal=journal, key="t:n:0:0")
        again = await registry.execute(done, ctx, journal=journal, key="t:n:0:0")
        assert first.text == again.text == "recorded once" and again.replayed
        assert record.read_text() == "once\n"  # the replay did not reach the server
        assert budget.used.tool_calls == 1
        (event, replayed) = [e.data for e in events.events if e.kind == "tool.call"]
        assert event["name"] == "record" and event["ok"] and replayed["replayed"]
        assert budget.exceeded() is None
        await registry.execute(ToolCall(id="2", name="echo", arguments={"text": "x"}), ctx)
        assert budget.exceeded() == "tool_calls"  # the agent loop stops at its next check
        with pytest.raises(BudgetExceeded):
            budget.check()
