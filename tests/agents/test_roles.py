"""Each role runs its tool loop against a real workspace and produces its output schema."""

from __future__ import annotations

from pathlib import Path

from agentflow.agents import CoderReport, Critique, Plan, Verdict
from agentflow.tools import ToolContext


async def test_planner_reads_the_code_and_returns_a_plan(scripted, ctx: ToolContext) -> None:
    run = scripted("planner", "planner")
    result = await run.agent.run("add(2, 3) returns -1; make it return 5", ctx=ctx)

    assert result.stop_reason == "done"
    assert isinstance(result.output, Plan)
    assert [s.files for s in result.output.steps] == [["calc.py"], ["check.py"]]
    assert result.steps == 3
    # The tool results that went back to the model are the real workspace contents.
    tool_texts = [m.content for m in result.messages if m.role == "tool"]
    assert tool_texts[0] == "calc.py\ncheck.py"
    assert "return a - b" in tool_texts[1]
    last_request = run.requests()[-1]
    assert [m.role for m in last_request.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert last_request.messages[3].tool_call_id == "c1"
    assert {t.name for t in last_request.tools} == {
        "list_files",
        "read_file",
        "write_file",
        "run_check",
        "wait",
    }
    # The task went through the planner's task template, the schema through its system template.
    assert "add(2, 3) returns -1" in last_request.messages[1].content
    assert '"steps"' in last_request.messages[0].content


async def test_coder_changes_files_and_reports(scripted, ctx: ToolContext, workspace: Path) -> None:
    run = scripted("coder", "coder")
    result = await run.agent.run(
        {"task": "fix add()", "plan": {"steps": [{"description": "fix it", "files": []}]}}, ctx=ctx
    )

    assert result.stop_reason == "done"
    assert isinstance(result.output, CoderReport) and result.output.done
    assert (workspace / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    check_result = [m.content for m in result.messages if m.role == "tool"][-1]
    assert check_result.startswith("exit code 0") and "check passed" in check_result
    assert "1. fix it" in result.messages[1].content  # the plan was rendered into the task prompt


async def test_critic_returns_issues_with_severity_and_location(scripted, ctx: ToolContext) -> None:
    run = scripted("critic", "critic")
    result = await run.agent.run({"task": "fix add()", "diff": "(no change)"}, ctx=ctx)

    assert result.stop_reason == "done"
    assert isinstance(result.output, Critique)
    assert [(i.severity, i.location) for i in result.output.issues] == [("major", "calc.py:2")]
    assert result.output.blocking == result.output.issues


async def test_verifier_runs_the_check_and_gives_a_verdict(
    scripted, ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    run = scripted("verifier", "verifier")
    result = await run.agent.run("add(2, 3) must be 5", ctx=ctx)

    assert result.stop_reason == "done"
    assert isinstance(result.output, Verdict) and result.output.passed
    assert result.output.evidence
    assert next(m.content for m in result.messages if m.role == "tool").startswith("exit code 0")


async def test_events_and_usage_are_recorded(scripted, ctx: ToolContext) -> None:
    run = scripted("planner", "planner")
    result = await run.agent.run("fix add()", ctx=ctx)

    kinds = [e.kind for e in ctx.events.events]
    assert kinds[0] == "agent.start" and kinds[-1] == "agent.end"
    assert kinds.count("model.call") == 3 and kinds.count("tool.call") == 2
    assert all(e.node_id == "planner" for e in ctx.events.events)
    assert result.usage.model_calls == 3 and result.usage.tool_calls == 2
    assert result.usage.tokens == 60 + 60 + 120
