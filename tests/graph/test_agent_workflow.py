"""The shipped plan -> approve -> code -> critique workflow with scripted (replayed) model replies."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentflow.graph import RunHandles, WorkflowRunner, load_workflow, validate

CASSETTE = Path(__file__).parent / "cassettes" / "plan_code_critique.json"


def test_shipped_agent_workflow_is_valid() -> None:
    assert validate(load_workflow("plan_code_critique")) == []


@pytest.mark.docker
async def test_plan_approve_code_critique_loop(tmp_path: Path) -> None:
    pytest.importorskip("agentflow.agents")
    from agentflow.models.replay import ReplayModel

    spec = load_workflow("plan_code_critique")
    ctx = RunHandles(chat_model=ReplayModel(CASSETTE))  # one scripted conversation across start and resume
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "cli.py").write_text("print('hi')\n")
    (repo / "test_cli.py").write_text("def test_runs():\n    assert True\n")  # tests that do not run fail the check
    # the check node runs the tests in a sandbox holding the workspace (docker: the default when tools need one)
    runner = WorkflowRunner(spec, run_dir=tmp_path, context=ctx, workspace=repo)
    async with runner:
        paused = await runner.start({"task": "add a --verbose flag"}, thread_id="p")
        assert paused.status == "interrupted"
        assert paused.interrupt is not None and paused.interrupt["node"] == "approve_plan"
        assert paused.state["plan"]["steps"][0]["files"] == ["cli.py"]
        done = await runner.resume("p", approve=True)
    state = done.state
    assert state["rounds"] == 2 and state["verdict"] == "accept"  # one revision after a major issue
    assert state["code"]["summary"] == "added --verbose and wired it to logging"
    assert state["critique"]["issues"] == []
    assert state["tests"]["ok"] is True and state["diff"] == ""  # the scripted coder edited nothing


async def test_check_without_a_sandbox_fails_the_run(tmp_path: Path) -> None:
    pytest.importorskip("agentflow.agents")
    from agentflow.models.replay import ReplayModel

    ctx = RunHandles(chat_model=ReplayModel(CASSETTE))
    spec = load_workflow("plan_code_critique")
    async with WorkflowRunner(spec, run_dir=tmp_path, context=ctx, sandbox="none") as runner:
        await runner.start({"task": "add a --verbose flag"}, thread_id="p")
        result = await runner.resume("p", approve=True)
    assert result.status == "failed" and result.failed_node == "check"
    assert "needs a sandbox" in result.errors["check"].error


async def test_agent_node_without_model_is_a_user_error(tmp_path: Path) -> None:
    pytest.importorskip("agentflow.agents")
    from agentflow.errors import UserError

    with pytest.raises(UserError, match="needs a model"):
        WorkflowRunner(load_workflow("plan_code_critique"), run_dir=tmp_path, sandbox="none")


async def test_agent_tokens_reach_the_custom_stream(tmp_path: Path) -> None:
    pytest.importorskip("agentflow.agents")
    from agentflow.graph.run.runner import StreamEvent
    from agentflow.models.replay import ReplayModel

    seen: list[StreamEvent] = []
    ctx = RunHandles(chat_model=ReplayModel(CASSETTE))
    spec = load_workflow("plan_code_critique")
    async with WorkflowRunner(spec, run_dir=tmp_path, context=ctx, sandbox="none") as runner:
        await runner.start({"task": "add a --verbose flag"}, thread_id="s", on_event=seen.append)
    tokens = [e.data for e in seen if e.mode == "custom" and e.data.get("event") == "token"]
    text = "".join(t["chunk"] for t in tokens if t["node"] == "plan")
    assert '"goal": "add a --verbose flag"' in text
