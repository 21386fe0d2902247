"""Failures are loud: a failed agent node ends the run `failed` (node, reason, error) unless the node has an
`on_error:` route; a gate never reads a missing critique as "accept"; the CLI exits non-zero."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentflow.graph import RunHandles, WorkflowRunner, spec_from_dict
from agentflow.models.replay import ReplayModel
from agentflow.workflows.demo import review_gate

CASSETTES = Path(__file__).parent / "cassettes"


def _cassette(tmp_path: Path, replies: list[str], name: str = "c.json") -> Path:
    """A sequence cassette of plain-text replies (no tool calls)."""
    inter = [
        {"response": {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                      "usage": {"input_tokens": 10, "output_tokens": 5}}}
        for text in replies
    ]
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "match": "sequence", "interactions": inter}))
    return path


def _spec(on_error: str | None = None) -> dict:
    node: dict = {"agent": "critic", "args": {"input": {"task": "task", "summary": "task"},
                                             "config": {"output_retries": 0}}, "output": "critique", "next": "END"}
    if on_error:
        node["on_error"] = on_error
    nodes = {"review": node}
    if on_error:
        nodes["fallback"] = {"fn": "agentflow.workflows.demo:summarize", "next": "END"}
    return {"name": "fails", "state": {"task": {"type": "str"}, "critique": {"type": "dict"},
                                         "topic": {"type": "str"}, "summary": {"type": "str"}},
            "nodes": nodes}


async def test_an_agent_with_no_readable_answer_fails_the_run(tmp_path: Path) -> None:
    ctx = RunHandles(chat_model=ReplayModel(_cassette(tmp_path, ["this is not JSON"])))
    async with WorkflowRunner(spec_from_dict(_spec()), run_dir=tmp_path / "r", context=ctx) as runner:
        result = await runner.start({"task": "check it"}, thread_id="t")
        assert result.status == "failed" and not result.ok
        assert result.failed_node == "review"
        assert result.stop_reason == "error"
        assert "not readable as Critique" in result.errors["review"].error
        assert "critique" not in result.state or result.state["critique"] is None
        assert result.usage.model_calls == 1 and result.usage.tokens == 15
        again = await runner.result("t")  # the failure is in the checkpoint: a reopened thread still says so
        assert again.status == "failed" and again.failed_node == "review" and again.stop_reason == "error"


async def test_on_error_routes_the_failure_instead(tmp_path: Path) -> None:
    ctx = RunHandles(chat_model=ReplayModel(_cassette(tmp_path, ["no json here"])))
    spec = spec_from_dict(_spec(on_error="fallback"))
    async with WorkflowRunner(spec, run_dir=tmp_path / "r", context=ctx) as runner:
        result = await runner.start({"task": "check it", "topic": "x"}, thread_id="t")
    assert result.status == "done"
    assert result.state["summary"].startswith("x:")  # the fallback node ran
    assert result.errors["review"].reason == "error"
    assert result.state["node_errors"]["review"]["node"] == "review"


async def test_step_limit_is_a_failure_reason(tmp_path: Path) -> None:
    spec = _spec()
    spec["nodes"]["review"]["args"]["config"] = {"step_limit": 1, "output_retries": 1}
    ctx = RunHandles(chat_model=ReplayModel(_cassette(tmp_path, ["not json"])))
    async with WorkflowRunner(spec_from_dict(spec), run_dir=tmp_path / "r", context=ctx) as runner:
        result = await runner.start({"task": "t"}, thread_id="t")
    assert result.status == "failed" and result.stop_reason == "step_limit"


def test_review_gate_never_accepts_a_missing_critique() -> None:
    with pytest.raises(ValueError, match="no critique"):
        review_gate({"critique": None, "rounds": 0})
    assert review_gate({"critique": {"issues": []}})["verdict"] == "accept"
    major = {"issues": [{"severity": "major", "description": "x"}]}
    assert review_gate({"critique": major, "max_rounds": 3})["verdict"] == "revise"


def test_cli_exits_non_zero_on_a_failed_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agentflow.cli.main import run

    wf = tmp_path / "fails.yaml"
    import yaml

    wf.write_text(yaml.safe_dump(_spec()))
    cassette = _cassette(tmp_path, ["not json"])
    code = run(["run", str(wf), "-m", f"replay:{cassette}", "-i", '{"task": "t"}', "-o", str(tmp_path / "runs"),
                "--json"])
    out = capsys.readouterr()
    assert code == 1
    summary = json.loads(out.out.strip().splitlines()[-1])
    assert summary["status"] == "failed" and summary["errors"]["review"]["reason"] == "error"
    assert "node 'review' failed" in out.err


async def test_agent_node_callable_raises_on_failure(tmp_path: Path) -> None:
    from agentflow.agents import Agent, agent_node
    from agentflow.graph.run.outcome import NodeFailed

    model = ReplayModel(_cassette(tmp_path, ["not json", "not json either"]))
    agent = Agent("critic", model=model, overrides=["tools=[]", "output_retries=0"])
    with pytest.raises(NodeFailed, match=r"node 'critic' failed \(error\)"):
        await agent_node(agent, input_key="task")({"task": "t"})
    quiet = await agent_node(agent, input_key="task", result_key="why", fail_on_error=False)({"task": "t"})
    assert quiet["critic"] is None and quiet["why"]["error_kind"] == "bad_output"


def test_edit_of_an_undeclared_key_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agentflow.cli.main import run

    approval = str(Path(__file__).parent / "approval.yaml")
    runs = str(tmp_path / "runs")
    assert run(["run", approval, "-o", runs, "--thread-id", "e1", "-i", '{"topic": "dogs"}']) == 0
    capsys.readouterr()
    assert run(["run", "-o", runs, "--resume", "e1", "--edit", '{"drfat": "typo"}']) == 2
    assert "--edit sets 'drfat'" in capsys.readouterr().err
