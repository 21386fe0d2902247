"""The tool-calling loop: errors go back to the model, and every limit stops the run cleanly."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentflow.agents import Agent, CoderReport, Plan, Verdict, load_agent_config
from agentflow.budget import Budget
from agentflow.models.instrumented import InstrumentedModel
from agentflow.models.replay import ReplayModel
from agentflow.tools import ToolContext

from .conftest import CASSETTES, PACK


async def test_invalid_arguments_and_unknown_tools_go_back_to_the_model(scripted, ctx: ToolContext) -> None:
    run = scripted("planner", "validation_error")
    result = await run.agent.run("fix add()", ctx=ctx)

    assert result.stop_reason == "done" and isinstance(result.output, Plan)
    tool_messages = [m for m in result.messages if m.role == "tool"]
    assert [m.tool_call_id for m in tool_messages] == ["c1", "c2", "c3"]
    assert "'path' is required" in tool_messages[0].content
    assert "return a - b" in tool_messages[1].content
    assert "no tool named 'delete_everything'" in tool_messages[2].content
    failed = [e.data["ok"] for e in ctx.events.events if e.kind == "tool.call"]
    assert failed == [False, True, False]


async def test_step_limit_stops_with_the_best_output_so_far(scripted, ctx: ToolContext) -> None:
    run = scripted("planner", "step_limit", "step_limit=2")
    result = await run.agent.run("fix add()", ctx=ctx)

    assert result.stop_reason == "step_limit"
    assert result.steps == 2
    assert len(run.requests()) == 2
    # The draft plan written beside the first tool call is the best output the run produced.
    assert isinstance(result.output, Plan) and result.output.steps[0].files == ["calc.py"]
    assert result.messages[-1].role == "tool"


async def test_token_budget_stops_with_reason_and_best_output(scripted, ctx: ToolContext) -> None:
    budget = Budget(tokens=100)
    run = scripted("planner", "budget_tokens")
    result = await run.agent.run("fix add()", ctx=ctx, budget=budget)

    assert (result.stop_reason, result.limit) == ("budget", "tokens")
    assert result.steps == 2  # 60 tokens per call: the check before the third call stops the run
    assert isinstance(result.output, Plan)
    assert budget.used.tokens == 120 and result.usage.tokens == 120
    assert [e.data["kind"] for e in ctx.events.events if e.kind == "budget.exceeded"] == ["tokens"]


async def test_tool_call_budget_stops_between_calls(scripted, ctx: ToolContext, workspace: Path) -> None:
    run = scripted("coder", "budget_tool_calls")
    result = await run.agent.run("fix add()", ctx=ctx, budget=Budget(tool_calls=1))

    assert (result.stop_reason, result.limit) == ("budget", "tool_calls")
    assert result.output is None
    tool_messages = [m for m in result.messages if m.role == "tool"]
    assert "return a - b" in tool_messages[0].content
    assert tool_messages[1].content.startswith("not run")  # every call still gets its result message
    assert "return a - b" in (workspace / "calc.py").read_text()  # the write never happened


async def test_one_budget_is_shared_by_every_agent_of_a_run(scripted, ctx: ToolContext) -> None:
    shared = Budget(model_calls=4)
    first = await scripted("planner", "planner").agent.run("fix add()", ctx=ctx, budget=shared)
    second = await scripted("verifier", "verifier").agent.run("check add()", ctx=ctx, budget=shared)

    assert first.stop_reason == "done" and first.usage.model_calls == 3
    assert (second.stop_reason, second.limit, second.steps) == ("budget", "model_calls", 1)
    assert shared.used.model_calls == 4


async def test_budget_from_the_tool_context_is_used(scripted, workspace: Path) -> None:
    budget = Budget(model_calls=1)
    ctx = ToolContext(budget=budget, state={"root": str(workspace)})
    result = await scripted("planner", "planner").agent.run("fix add()", ctx=ctx)

    assert (result.stop_reason, result.limit) == ("budget", "model_calls")
    assert budget.used.model_calls == 1 and budget.used.tool_calls == 0
    assert result.messages[-1].content == "not run: the agent stopped (budget:model_calls)"
    assert ctx.budget is budget  # the caller's context is not changed


async def test_wall_time_limit_stops_the_run(scripted, ctx: ToolContext) -> None:
    # a wide margin: under CPU contention the first step alone can take a good part of a second
    run = scripted("coder", "wall_time", "wall_time_s=1.0")
    result = await run.agent.run("wait for the build", ctx=ctx)

    assert result.stop_reason == "wall_time"
    assert result.steps == 1
    assert [m.content for m in result.messages if m.role == "tool"] == ["waited 1.5s"]


async def test_text_protocol_runs_fenced_tool_blocks(scripted, ctx: ToolContext, workspace: Path) -> None:
    run = scripted("coder", "text_protocol", "tool_protocol=text")
    result = await run.agent.run("fix add()", ctx=ctx)

    assert result.stop_reason == "done"
    assert isinstance(result.output, CoderReport) and result.output.done
    assert (workspace / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    requests = run.requests()
    assert all(r.tools == [] for r in requests)  # tools are described in the prompt instead
    system = requests[0].messages[0].content
    assert "```tool" in system and "### write_file" in system
    # Results come back as one user message per reply; the malformed block is reported, not run.
    first_results = requests[1].messages[-1]
    assert first_results.role == "user"
    assert "name: write_file\nok: true" in first_results.content
    assert "not valid JSON" in first_results.content
    second_results = requests[2].messages[-1].content
    assert "name: run_check\nok: true" in second_results and "check passed" in second_results
    assert all(not m.tool_calls for m in result.messages)


async def test_auto_protocol_uses_text_for_models_without_tool_calling(
    ctx: ToolContext, workspace: Path
) -> None:
    replay = ReplayModel(CASSETTES / "text_protocol.json")
    replay.supports_tools = False  # type: ignore[attr-defined]  # what a backend profile reports
    model = InstrumentedModel(replay)  # the flag is found through wrappers
    agent = Agent(load_agent_config("coder", [f"tools=[{PACK}]", "structured_output=true"]), model=model)
    assert agent.config.tool_protocol == "auto" and agent.text_protocol()
    result = await agent.run("fix add()", ctx=ctx)
    assert result.stop_reason == "done"
    assert "return a + b" in (workspace / "calc.py").read_text()


def test_auto_protocol_reads_a_serving_profile() -> None:
    from agentflow.serving.profiles import default_profile

    for tool_calling in (False, True):
        replay = ReplayModel(CASSETTES / "planner.json")
        replay.profile = default_profile(tool_calling=tool_calling)  # type: ignore[attr-defined]
        assert Agent("planner", model=replay).text_protocol() is not tool_calling


async def test_unparseable_answer_is_fed_back_once(scripted, ctx: ToolContext) -> None:
    run = scripted("verifier", "parse_retry")
    result = await run.agent.run("check add()", ctx=ctx)

    assert result.stop_reason == "done"
    assert isinstance(result.output, Verdict) and not result.output.passed
    feedback = run.requests()[1].messages[-1]
    assert feedback.role == "user"
    assert "could not be read as `Verdict`" in feedback.content and "no JSON object" in feedback.content


async def test_second_unparseable_answer_ends_the_run_with_error(scripted, ctx: ToolContext) -> None:
    run = scripted("verifier", "parse_fail_twice")
    result = await run.agent.run("check add()", ctx=ctx)

    assert result.stop_reason == "error"
    assert result.output is None
    assert result.steps == 2
    assert "verdict" in (result.error or "")
    assert "verdict" in run.requests()[1].messages[-1].content or len(run.requests()) == 2


async def test_structured_output_sends_the_schema(scripted, ctx: ToolContext) -> None:
    run = scripted("verifier", "verifier", "structured_output=true")
    result = await run.agent.run("check add()", ctx=ctx)

    assert result.stop_reason == "done"
    request = run.requests()[0]
    assert request.response_schema == Verdict.model_json_schema()
    assert request.response_schema_name == "Verdict"
    assert request.temperature == 0.0


async def test_model_errors_end_the_run_with_error(ctx: ToolContext, tmp_path: Path) -> None:
    from agentflow.errors import ModelError

    class Failing(ReplayModel):
        async def chat(self, request):  # type: ignore[no-untyped-def]
            raise ModelError("upstream returned 500 after 4 attempts")

    agent = Agent("planner", model=Failing(CASSETTES / "planner.json"), overrides=[f"tools=[{PACK}]"])
    result = await agent.run("fix add()", ctx=ctx)
    assert result.stop_reason == "error" and "500" in (result.error or "")


@pytest.mark.parametrize("protocol", ["native", "text"])
async def test_a_replay_miss_is_not_swallowed(protocol: str, ctx: ToolContext) -> None:
    from agentflow.errors import ReplayMiss

    agent = Agent(
        "verifier",
        model=ReplayModel(CASSETTES / "parse_fail_twice.json"),
        overrides=[f"tools=[{PACK}]", f"tool_protocol={protocol}", "output_retries=5"],
    )
    with pytest.raises(ReplayMiss):
        await agent.run("check add()", ctx=ctx)


async def test_wall_time_also_bounds_a_model_call_in_flight(ctx: ToolContext) -> None:
    class SlowReplay(ReplayModel):
        """A replayed model whose second call takes far longer than the agent may wait."""

        async def chat(self, request):  # type: ignore[no-untyped-def]
            if self._calls >= 1:
                await asyncio.sleep(30)
            return await super().chat(request)

    agent = Agent(
        "planner",
        model=SlowReplay(CASSETTES / "planner.json"),
        overrides=[f"tools=[{PACK}]", "wall_time_s=0.5"],
    )
    result = await agent.run("fix add()", ctx=ctx)
    assert result.stop_reason == "wall_time"
    assert result.steps == 2 and result.usage.model_calls == 1
