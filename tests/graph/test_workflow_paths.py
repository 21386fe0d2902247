"""Every path in a workflow file resolves against the file's folder, never the current one: `replay:` model
cassettes, agent YAML files, `prompt_dirs`, `fn:` files (inline subgraphs' too), subgraph files, MCP servers'
`cwd` and the script their command runs."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml

from agentflow.errors import UserError
from agentflow.graph import WorkflowRunner, load_workflow, validate
from tests.mcp.conftest import FIXTURE, final_step, tool_step, write_cassette

STEPS = "def finish(state):\n    return {'done': state['answer']['text'] == 'the sum is 42'}\n"


def write_flow(flows: Path) -> Path:
    """A workflow whose every part is a file beside it: the model's cassette, the agent, its prompt, the MCP
    server script and an inline subgraph's function."""
    for folder in ("agents", "prompts", "cassettes"):
        (flows / folder).mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURE, flows / "fixture_server.py")
    (flows / "steps.py").write_text(STEPS)
    (flows / "agents" / "helper.yaml").write_text("name: helper\nprompt: mine\ntools: []\nstep_limit: 4\n")
    (flows / "prompts" / "mine.system.md").write_text("You add numbers with the tools you are given.")
    (flows / "prompts" / "mine.task.md").write_text("{{ task }}")
    write_cassette(flows / "cassettes" / "add.json",
                   [tool_step("fx_add", {"a": 19, "b": 23}, "c1"), final_step("the sum is 42")])
    spec = {
        "name": "paths",
        "model": "replay:cassettes/add.json",
        "state": {"task": {"type": "str"}, "answer": {"type": "any"}, "done": {"type": "bool"}},
        "mcp_servers": {"fixture": {"command": [sys.executable, "fixture_server.py"], "prefix": "fx_"}},
        "nodes": {
            "helper": {"agent": "agents/helper.yaml", "args": {"input": "task", "config": {"prompt_dirs": ["prompts"]}},
                       "output": "answer", "next": "check"},
            "check": {"subgraph": {"name": "inner", "state": {"answer": {"type": "any"}, "done": {"type": "bool"}},
                                   "nodes": {"finish": {"fn": "steps.py:finish", "writes": ["done"], "next": "END"}}},
                      "next": "END"},
        },
    }
    path = flows / "flow.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


async def test_a_workflow_runs_from_any_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_flow(tmp_path / "flows")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # nothing the workflow names is here
    spec = load_workflow(Path("..") / "flows" / "flow.yaml")  # a relative path to the file works too
    assert validate(spec) == []
    async with WorkflowRunner(spec, run_dir=tmp_path / "run") as runner:
        result = await runner.start({"task": "add 19 and 23"})
    assert result.status == "done", result.errors
    assert result.state["answer"]["text"] == "the sum is 42"  # the cassette, agent, prompt and MCP server were found
    assert result.state["done"] is True  # the inline subgraph's steps.py was found


def test_paths_are_made_absolute_in_the_workflow_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flows = tmp_path / "flows"
    write_flow(flows)
    monkeypatch.chdir(tmp_path)
    spec = load_workflow("flows/flow.yaml")
    here = flows.resolve()
    helper = spec.nodes["helper"]
    assert spec.model == f"replay:{here / 'cassettes' / 'add.json'}"
    assert helper.agent == str(here / "agents" / "helper.yaml")
    assert helper.args["config"]["prompt_dirs"] == [str(here / "prompts")]
    assert spec.mcp_servers[0].argv == [sys.executable, str(here / "fixture_server.py")]
    assert spec.nodes["check"].subgraph.nodes["finish"].fn == f"{here / 'steps.py'}:finish"


def test_what_is_not_in_the_workflow_folder_is_not_taken_from_the_current_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flows = tmp_path / "flows"
    flows.mkdir()
    (tmp_path / "inner.yaml").write_text("name: inner\nnodes: {a: {fn: 'agentflow.workflows.demo:prepare'}}\n")
    (tmp_path / "steps.py").write_text(STEPS)
    (tmp_path / "srv").mkdir()
    monkeypatch.chdir(tmp_path)  # inner.yaml, steps.py and srv/ are here, not beside the workflow
    flow = flows / "flow.yaml"
    flow.write_text(yaml.safe_dump({"name": "f", "nodes": {"a": {"subgraph": "inner.yaml", "next": "END"}}}))
    with pytest.raises(UserError, match=f"{flows / 'inner.yaml'}.* not found"):
        load_workflow(flow)
    flow.write_text(yaml.safe_dump({
        "name": "f", "model": "replay:add.json",
        "mcp_servers": [{"name": "s", "command": "python server.py", "cwd": "srv"}],
        "nodes": {"a": {"fn": "steps.py:finish", "next": "END"}}}))
    spec = load_workflow(flow)
    assert spec.model == f"replay:{flows.resolve() / 'add.json'}"
    assert spec.mcp_servers[0].cwd == str(flows.resolve() / "srv")
    (problem,) = validate(spec)
    assert str(flows.resolve() / "steps.py") in problem.message
