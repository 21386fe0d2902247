"""Agent configs (roles, YAML, -c overrides), prompt templates, graph-node use and journaled tool effects."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentflow.agents import (
    ROLES,
    Agent,
    AgentConfig,
    CoderReport,
    Critique,
    Plan,
    Verdict,
    agent_node,
    load_agent_config,
)
from agentflow.budget import Budget
from agentflow.errors import ConfigError, UserError
from agentflow.models.replay import ReplayModel
from agentflow.tools import SqliteToolJournal, ToolContext

from .conftest import CASSETTES, PACK


def test_roles_name_their_schemas_and_prompts() -> None:
    assert set(ROLES) == {"planner", "coder", "critic", "verifier"}
    schemas = {name: cfg.output_schema for name, cfg in ROLES.items()}
    assert schemas == {"planner": Plan, "coder": CoderReport, "critic": Critique, "verifier": Verdict}
    for name in ROLES:
        agent = Agent(name, model=ReplayModel(CASSETTES / "planner.json"))
        messages = agent.initial_messages("do the thing", [])
        assert "do the thing" in messages[1].content
        assert agent.schema.__name__ in messages[0].content


def test_yaml_config_with_overrides(tmp_path: Path) -> None:
    path = tmp_path / "reviewer.yaml"
    path.write_text(
        "name: reviewer\nmodel: openai:gpt-4o-mini\nprompt: critic\ntools: [search]\n"
        "output_schema: agentflow.agents.schemas:Critique\nstep_limit: 8\n"
    )
    extra = tmp_path / "extra.yaml"
    extra.write_text("temperature: 0.7\n")
    config = load_agent_config(path, ["step_limit=3", str(extra), "tool_protocol=text"])
    assert (config.name, config.step_limit, config.temperature, config.tool_protocol) == (
        "reviewer",
        3,
        0.7,
        "text",
    )
    assert config.model == "openai:gpt-4o-mini"
    # Overriding a role copies it; the role table itself stays as it was.
    coder = load_agent_config("coder", ["step_limit=5", "wall_time_s=60"])
    assert (coder.step_limit, coder.wall_time_s) == (5, 60)
    assert ROLES["coder"].step_limit == 40


@pytest.mark.parametrize(
    ("source", "overrides", "message"),
    [
        ("coder", ["step_limt=5"], "step_limt"),
        ("coder", ["step_limit=0"], "step_limit"),
        ("coder", ["tool_protocol=smoke"], "tool_protocol"),
        ("janitor", [], "unknown agent 'janitor'"),
        ("coder", ["output_schema=agentflow.agents.schemas:Nope"], "Nope"),
        ("coder", ["output_schema=no_such_module_xyz:Plan"], "cannot import"),
    ],
)
def test_bad_agent_configs_are_one_line_user_errors(source: str, overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        Agent(source, overrides=overrides)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_prompt_templates_are_strict_and_overridable(tmp_path: Path) -> None:
    (tmp_path / "terse.system.md").write_text("You are {{ agent }}. Answer as {{ schema_name }}.")
    (tmp_path / "terse.task.md").write_text("Repository {{ repo }}: {{ task }}")
    agent = Agent(
        AgentConfig(name="t", prompt="terse", prompt_dirs=[str(tmp_path)]),
        model=ReplayModel(CASSETTES / "planner.json"),
    )
    system, user = agent.initial_messages({"task": "fix it", "repo": "calc"}, [])
    assert system.content == "You are t. Answer as FinalText."
    assert user.content == "Repository calc: fix it"
    with pytest.raises(ConfigError, match="'repo' is undefined"):
        agent.initial_messages("fix it", [])
    with pytest.raises(ConfigError, match="not found"):
        Agent(AgentConfig(prompt="missing"), model=ReplayModel(CASSETTES / "planner.json")).initial_messages(
            "x", []
        )


async def test_a_schema_class_and_its_import_path_make_the_same_agent(ctx: ToolContext) -> None:
    """From Python the class itself, from text (YAML, `-c`) its `module:Class`: resolved once, at load, to the
    same class, so the agent asks for and parses the same answer; a config dumped as JSON names it again."""
    replay = f"model=replay:{CASSETTES / 'parse_retry.json'}"
    by_class = Agent(load_agent_config(AgentConfig(name="verifier", prompt="verifier", output_schema=Verdict),
                                       [f"tools=[{PACK}]", replay]))
    by_path = Agent("verifier", overrides=[f"tools=[{PACK}]", replay,
                                           "output_schema=agentflow.agents.schemas:Verdict"])
    yaml_like = load_agent_config({"output_schema": "agentflow.agents.schemas:Verdict"})
    assert by_class.schema is by_path.schema is yaml_like.output_schema is Verdict
    assert by_class.initial_messages("check add()", []) == by_path.initial_messages("check add()", [])
    results = [await agent.run("check add()", ctx=ctx) for agent in (by_class, by_path)]
    assert results[0].output == results[1].output and isinstance(results[0].output, Verdict)
    dumped = by_class.config.model_dump(mode="json")
    assert dumped["output_schema"] == "agentflow.agents.schemas:Verdict"
    assert AgentConfig.model_validate(dumped).output_schema is Verdict


@pytest.mark.parametrize("given", ["agentflow.agents.schemas:Nope", "no_such_module_xyz:Plan", "Plan", 3, str])
def test_a_bad_output_schema_is_one_line(given: object) -> None:
    with pytest.raises(ConfigError) as info:
        AgentConfig(output_schema=given)
    assert "output_schema" in str(info.value) and "\n" not in str(info.value)


async def test_model_spec_in_the_config_is_loaded(ctx: ToolContext) -> None:
    agent = Agent("verifier", overrides=[f"tools=[{PACK}]", f"model=replay:{CASSETTES / 'parse_retry.json'}"])
    result = await agent.run("check add()", ctx=ctx)
    assert result.stop_reason == "done" and isinstance(result.output, Verdict)


async def test_agent_node_maps_state_to_updates(scripted, ctx: ToolContext) -> None:
    budget = Budget()
    node = agent_node(
        scripted("planner", "planner").agent,
        input_key=["task", "context"],
        output_key="plan",
        result_key="planner_run",
        ctx=ctx,
        budget=budget,
    )
    update = await node({"task": "fix add()", "context": "calc.py has add()", "other": 1})

    assert set(update) == {"plan", "planner_run"}
    assert Plan.model_validate(update["plan"]).steps[0].files == ["calc.py"]
    assert update["planner_run"]["stop_reason"] == "done" and update["planner_run"]["agent"] == "planner"
    assert budget.used.model_calls == 3
    with pytest.raises(UserError, match="state has no 'task'"):
        await agent_node(node.agent)({"goal": "x"})


async def test_agent_node_chains_into_the_next_agent(scripted, ctx: ToolContext, workspace: Path) -> None:
    state: dict[str, object] = {"task": "fix add()"}
    state |= await agent_node(scripted("planner", "planner").agent, output_key="plan", ctx=ctx)(state)
    state |= await agent_node(scripted("coder", "coder").agent, input_key=["task", "plan"], ctx=ctx)(state)

    assert CoderReport.model_validate(state["coder"]).done
    assert "return a + b" in (workspace / "calc.py").read_text()


async def test_journal_replays_tool_effects_on_resume(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    journal = SqliteToolJournal(tmp_path / "journal.db")
    try:
        for attempt in range(2):
            (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
            agent = Agent("coder", model=ReplayModel(CASSETTES / "coder.json"), overrides=[f"tools=[{PACK}]"])
            result = await agent.run("fix add()", ctx=ctx, journal=journal, journal_key="thread-1:coder:1")
            assert result.stop_reason == "done"
            replayed = [e.data["replayed"] for e in ctx.events.events if e.kind == "tool.call"][-3:]
            assert replayed == [attempt == 1] * 3
        # The resumed run did not write the file again: its effect was taken from the journal.
        assert "return a - b" in (workspace / "calc.py").read_text()
        assert len(journal.keys("thread-1:coder:1")) == 3
    finally:
        journal.close()


def test_the_role_table_cannot_be_changed_through_a_lookup() -> None:
    ROLES["coder"].step_limit = 1
    assert ROLES["coder"].step_limit == 40
    assert Agent("coder").config.step_limit == 40
