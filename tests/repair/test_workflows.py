"""The repair is a workflow: a user's YAML changes its steps, `graph validate/show` read it, node settings are
checked like any other config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentflow.cli.main import run
from agentflow.repair.config import load_repair_config, run_field, run_setting_names, with_setting
from agentflow.repair.nodetypes.rollout import SweEditSettings
from agentflow.repair.run.solve import load_repair_workflow

from .conftest import ROOT, TASKS_FILE, read_jsonl, scripted_cassette

USER_WORKFLOW = ROOT / "examples" / "workflows" / "repair_with_critic.yaml"


def test_the_shipped_repair_workflow_validates_and_shows_its_search_node(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["graph", "validate", "workflows/repair.yaml"]) == 0
    assert run(["graph", "show", "repair"]) == 0
    shown = capsys.readouterr().out
    assert 'subgraph search["search: search best_of_n (strategy=best_of_n, n=1, ' in shown
    assert 'search__edit["edit: swe.edit"]' in shown and "search__edit --> search__test" in shown
    assert "search__test -.-> search__critique" in shown and "search__critique --> search__edit" in shown


def test_node_settings_are_validated_against_their_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(USER_WORKFLOW.read_text().replace("{temperature: 0.7}", "{temperatur: 0.7}"))
    assert run(["graph", "validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "settings.temperatur" in err and "Extra inputs are not permitted" in err
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(USER_WORKFLOW.read_text().replace("type: swe.rank", "type: swe.rnak"))
    assert run(["graph", "validate", str(unknown)]) == 2
    assert "unknown type 'swe.rnak'" in capsys.readouterr().err


def test_settings_precedence_run_then_node_then_c_nodes() -> None:
    cfg = load_repair_config([f"workflow={USER_WORKFLOW}", "sampling.temperature=0.1", "nodes.review.max_tokens=99"])
    _, _, settings = load_repair_workflow(cfg)
    assert settings["edit"] == {"temperature": 0.7}  # the node's own setting beats the run's
    assert settings["review"] == {"critique": True, "max_tokens": 99}
    assert settings["test"] == {"max_attempts": 3}
    with pytest.raises(Exception, match="nodes.nope"):
        load_repair_workflow(load_repair_config([f"workflow={USER_WORKFLOW}", "nodes.nope.n=2"]))


def test_strategy_sets_the_search_node() -> None:
    spec, _, _ = load_repair_workflow(load_repair_config(["search.strategy=mcts", "search.n=3", "search.max_attempts=2"]))
    assert (spec.nodes["search"].search["strategy"], spec.nodes["search"].search["n"]) == ("mcts", 6)
    spec, _, _ = load_repair_workflow(load_repair_config(["search.strategy=best_of_n", "search.n=1"]))
    assert (spec.nodes["search"].search["strategy"], spec.nodes["search"].search["n"]) == ("best_of_n", 1)
    spec, _, _ = load_repair_workflow(load_repair_config(["search.strategy=best_of_n", "search.n=8"]))
    assert (spec.nodes["search"].search["strategy"], spec.nodes["search"].search["n"]) == ("best_of_n", 8)


@pytest.mark.docker
def test_a_user_workflow_runs_its_nodes_in_its_order(docker_image: str, tmp_path: Path) -> None:
    """No reproduction step, and a critic reviews the failed attempt before the next one."""
    wrong = ('inikit/parser.py\n<<<<<<< SEARCH\n        parts = stripped.split("=")\n=======\n'
             '        parts = stripped.split("=", 2)\n>>>>>>> REPLACE\nEND_EDITS')
    right = ('inikit/parser.py\n<<<<<<< SEARCH\n        parts = stripped.split("=", 2)\n=======\n'
             '        parts = stripped.split("=", 1)\n>>>>>>> REPLACE\nEND_EDITS')
    review = "Splitting at two '=' still cuts values with more of them; split only at the first '='."
    cassette = scripted_cassette(tmp_path / "c.json", ["1", wrong, review, right])  # rank, edit, critic, edit
    out = tmp_path / "run"
    code = run(["repair", "--tasks", str(TASKS_FILE), "-i", "inikit__inikit-1", "--model", f"replay:{cassette}",
                "--workflow", str(USER_WORKFLOW), "--sandbox", "docker", "-c", f"sandbox.image={docker_image}",
                "-c", "search.concurrency=1", "-c", "edit.format=search_replace", "-c", "tests.feedback=task", "-c", "mutants=false", "-o", str(out)])
    assert code == 0
    events = read_jsonl(out / "events.jsonl")
    ran = [e["node_id"].split("/", 1)[1] for e in events if e["kind"] == "node.start" and "branch" not in e["data"]]
    assert ran == ["baseline", "rank", "search", "choose"]  # the user's order, no reproduce or plan
    chain = [e["node_id"].split("/", 1)[1] for e in events if e["kind"] == "node.start" and "branch" in e["data"]]
    assert chain == ["edit", "test", "review", "edit", "test"]  # the critic between the two attempts
    calls = [e for e in events if e["kind"] == "model.call"]
    assert len(calls) == 4
    outcome = json.loads((out / "instances" / "inikit__inikit-1" / "outcome.json").read_text())
    assert outcome["status"] == "submitted" and outcome["report"]["resolved"] is True
    cands = read_jsonl(out / "instances" / "inikit__inikit-1" / "candidates.jsonl")
    assert [c["verification"]["passed"] for c in cands] == [False, True]
    resolved = (out / "config.resolved.yaml").read_text()
    assert "repair_with_critic.yaml" in resolved


@pytest.mark.docker
def test_agentflow_run_runs_a_repair_workflow_from_its_input(docker_image: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """`agentflow run repair --input {...}` is the same repair as `agentflow repair`: the task from the input,
    the workflow's nodes in order, the -c items as the repair's settings."""
    right = ('inikit/parser.py\n<<<<<<< SEARCH\n        parts = stripped.split("=")\n=======\n'
             '        parts = stripped.split("=", 1)\n>>>>>>> REPLACE\nEND_EDITS')
    cassette = scripted_cassette(tmp_path / "c.json", ["1", right])  # rank, edit
    state = json.dumps({"tasks": str(TASKS_FILE), "instance_id": "inikit__inikit-1"})
    code = run(["run", "repair", "--input", state, "--model", f"replay:{cassette}", "--sandbox", "docker",
                "-c", f"sandbox.image={docker_image}", "-c", "edit.format=search_replace", "-c", "tests.feedback=task", "-c", "mutants=false",
                "-o", str(tmp_path / "runs"), "--json"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["status"] == "submitted" and printed["report"]["resolved"] is True
    run_dir = Path(printed["run_dir"])
    assert run_dir.parent == tmp_path / "runs"
    events = read_jsonl(run_dir / "events.jsonl")
    ran = [e["node_id"].split("/", 1)[1] for e in events if e["kind"] == "node.start" and "branch" not in e["data"]]
    assert ran == ["baseline", "spectrum", "rank", "reproduce", "plan", "mutants", "search", "choose"]
    branch = [e["node_id"].split("/", 1)[1] for e in events if e["kind"] == "node.start" and "branch" in e["data"]]
    assert branch == ["edit", "test"]  # the search's one branch: its edit passed at once
    # a repair workflow takes no --workspace: the repository comes from the input
    assert run(["run", "repair", "--input", state, "--workspace", str(tmp_path)]) == 2
    assert "repair workflow" in capsys.readouterr().err


def test_failing_tests_at_the_base_switch_the_search_unless_the_user_chose_one() -> None:
    """`strategy_when_tests_fail` (mcts by default) sets the search of a task whose tests fail at the base commit,
    as `--strategy` would, on a copy of the workflow; a strategy of the user's (`--strategy`, `-c
    nodes.search.strategy`) or the setting off leaves the search as it is; the run's config then keeps the
    setting as given (each task's pre-flight decides)."""
    from agentflow.repair.run.solve import effective_strategy
    from agentflow.repair.run.workflow_settings import searches_for_failing_tests

    cfg = load_repair_config([])
    workflow = load_repair_workflow(cfg)
    switched = searches_for_failing_tests(workflow[0], cfg)
    assert switched is not None
    assert (switched.nodes["search"].search["strategy"], switched.nodes["search"].search["n"]) == ("mcts", 12)
    assert workflow[0].nodes["search"].search["strategy"] == "best_of_n"  # the loaded workflow is not changed
    assert effective_strategy(cfg, workflow) == cfg
    cfg = load_repair_config(["nodes.search.n=5", "search.max_attempts=2"])
    switched = searches_for_failing_tests(load_repair_workflow(cfg)[0], cfg)
    assert switched is not None
    assert (switched.nodes["search"].search["strategy"], switched.nodes["search"].search["n"]) == ("mcts", 5)
    for kept in (["search.strategy=best_of_n"], ["nodes.search.strategy=rebase"], ["search.when_tests_fail=null"]):
        cfg = load_repair_config(kept)
        workflow = load_repair_workflow(cfg)
        assert searches_for_failing_tests(workflow[0], cfg) is None
        assert effective_strategy(cfg, workflow).nodes["search"] == workflow[0].nodes["search"].search
    # codemonkeys' search runs whole trajectories, not chains of attempts: it keeps its workflow's settings
    cfg = load_repair_config(["workflow=codemonkeys"])
    workflow = load_repair_workflow(cfg)
    assert searches_for_failing_tests(workflow[0], cfg) is None
    assert effective_strategy(cfg, workflow).nodes["trajectories"]["strategy"] == "best_of_n"
    assert workflow[0].nodes["trajectories"].search["n"] == 3


def test_the_search_node_takes_the_strategy_and_the_runs_settings() -> None:
    """The graph search node of `repair`: `--strategy` and `-c nodes.search.*` set its `search:` (the latter
    last); its concurrency and seed default to the run's; config.resolved.yaml repeats it exactly."""
    from agentflow.repair.run.solve import effective_strategy

    cfg = load_repair_config(["search.strategy=mcts", "search.n=3", "search.max_attempts=2", "search.c=0.5",
                              "search.concurrency=2"])
    spec, _, _ = load_repair_workflow(cfg)
    search = spec.nodes["search"].search
    assert (search["strategy"], search["n"], search["c"], search["concurrency"]) == ("mcts", 6, 0.5, 2)
    assert search["value"] == "value" and search["gather"] == ["attempts", "resampled", "drawn"]
    cfg = load_repair_config(["search.strategy=best_of_n", "nodes.search.strategy=rebase",
                              "nodes.search.n=3"])
    workflow = load_repair_workflow(cfg)
    assert (workflow[0].nodes["search"].search["strategy"], workflow[0].nodes["search"].search["n"]) == ("rebase", 3)
    resolved = effective_strategy(cfg, workflow)
    assert resolved.search.strategy is None and resolved.nodes["search"] == workflow[0].nodes["search"].search
    again, _, _ = load_repair_workflow(resolved)
    assert again.nodes["search"].search == workflow[0].nodes["search"].search
    with pytest.raises(Exception, match="search.strategi"):
        load_repair_workflow(load_repair_config(["nodes.search.strategi=mcts"]))


def test_the_rollout_nodes_are_given_their_settings() -> None:
    """A typed node runs with the settings it is given: the run's value of each setting its type takes, then the
    workflow's `settings:`, then `-c nodes.<node>.*` (the node-level ones alone are the node's own)."""
    cfg = load_repair_config(["sampling.temperature=0.1", "search.max_attempts=2",
                              "nodes.edit.max_tokens=99", "nodes.test.split_edits=false"])
    spec, registry, own = load_repair_workflow(cfg)
    sub = spec.nodes["search"].subgraph
    edit = registry.require("swe.edit", "edit").parse_settings(sub.nodes["edit"].settings, "edit")
    test = registry.require("swe.test", "test").parse_settings(sub.nodes["test"].settings, "test")
    assert (edit.temperature, edit.max_tokens, edit.noop_retries) == (0.1, 99, SweEditSettings().noop_retries)
    assert (test.max_attempts, test.split_edits) == (2, False)
    assert own["edit"] == {"max_tokens": 99} and own["test"] == {"split_edits": False}


def test_a_node_runs_with_the_settings_it_is_given() -> None:
    """A node's steps read its settings as the run hands them over: the run's value of each setting its type
    takes (a node type's own setting given as the run's, under `nodes.*`), then its own; `edit_format: auto`
    as the task's coder's (`EditFormatSettings.for_coder`). A setting the run has too is typed as the run's."""
    from agentflow.repair.nodes import NODE_TYPES
    from agentflow.repair.nodetypes.rollout import SweEditSettings

    cfg = load_repair_config(["rank_pool=7", "nodes.rank.rank_pool=3", "sampling.temperature=0.3", "sampling.seed=11"])
    spec, registry, _ = load_repair_workflow(cfg)
    rank = registry.require("swe.rank", "rank").parse_settings(spec.nodes["rank"].settings, "rank")
    assert (rank.rank_pool, rank.seed) == (3, 11)
    edit = registry.require("swe.edit", "edit").parse_settings(spec.nodes["search"].subgraph.nodes["edit"].settings,
                                                               "edit")
    assert isinstance(edit, SweEditSettings) and edit.edit_format == "auto"
    run_cfg = with_setting(cfg, "edit.format", "rewrite")  # as the task's runtime holds it
    assert (edit.for_coder(run_cfg).edit_format, edit.for_coder(run_cfg).temperature) == ("rewrite", 0.3)
    assert edit.model_copy(update={"edit_format": "tools"}).for_coder(run_cfg).edit_format == "tools"
    for node_type in NODE_TYPES:
        for name, field in (node_type.settings.model_fields.items() if node_type.settings else ()):
            if name in run_setting_names():
                assert field.annotation == run_field(name).annotation, (node_type.name, name)


def test_a_node_types_setting_given_as_the_runs_reaches_every_node_that_takes_it() -> None:
    """A setting only node types take (declared in their settings class, not in `RepairConfig`) given as the
    run's (`-c localize_files=2`) is kept as `nodes.*`: each node whose type takes it gets it, under the
    workflow's own `settings:` and `-c nodes.<node>.*`; a name no type takes is a one-line error naming the
    nearest, and a bad value one naming the node."""
    from agentflow.errors import ConfigError
    from agentflow.repair.config import RepairConfig
    from agentflow.repair.nodetypes.localize_model import LocalizeSettings

    def settings_of(cfg: RepairConfig, node: str, node_type: str) -> Any:
        spec, registry, _ = load_repair_workflow(cfg)
        return registry.require(node_type, node).parse_settings(spec.nodes[node].settings, node)

    assert "localize_files" not in run_setting_names() and LocalizeSettings().localize_files == 3
    cfg = load_repair_config(["workflow=agentless", "localize_files=2", "critique=true"])
    assert cfg.nodes["*"] == {"critique": True, "localize_files": 2}
    assert settings_of(cfg, "localize", "swe.localize").localize_files == 2
    cfg = load_repair_config(["workflow=agentless", "localize_files=2", "nodes.localize.localize_files=1"])
    assert settings_of(cfg, "localize", "swe.localize").localize_files == 1
    # swe_search.yaml gives its discriminator `finalists: 3, debaters: 2`: the workflow's own stand
    discriminate = settings_of(load_repair_config(["workflow=swe_search", "debaters=3"]), "discriminate",
                               "swe.discriminate")
    assert (discriminate.finalists, discriminate.debaters) == (3, 2)
    with pytest.raises(ConfigError, match=r"nodes\.\*\.finalistz: no node type takes that setting; did you mean "
                                          "'finalists'"):
        load_repair_config(["nodes.*.finalistz=4"])
    with pytest.raises(ConfigError, match="node 'localize': settings.localize_files"):
        load_repair_workflow(load_repair_config(["workflow=agentless", "localize_files=99"]))


def test_a_repair_node_outside_a_repair_is_a_one_line_error() -> None:
    """A repair node finds the task's runtime as the run's deps: a graph run without them names the way in."""
    import asyncio

    from agentflow.errors import UserError
    from agentflow.graph.define.loader import spec_from_dict
    from agentflow.graph.run.runner import WorkflowRunner

    async def start(deps: object) -> None:
        spec = spec_from_dict({"name": "w", "nodes": {"base": {"type": "swe.baseline", "next": "END"}}})
        async with WorkflowRunner(spec, checkpointer="memory", deps=deps) as runner:
            await runner.start({}, thread_id="t")

    for deps in (None, {"repair": "not a runtime"}):
        with pytest.raises(UserError, match="node 'base' \\(swe.baseline\\) runs only with the run's RepairRuntime as its deps"):
            asyncio.run(start(deps))


def test_the_repair_state_types_the_workflows_state_keys() -> None:
    """The repair node types name `RepairState`: the keys they read and write have its types in the graph's
    state schema (the keys a workflow declares under `state:` keep its types)."""
    import typing

    from agentflow.graph.compile.compiler import registry_for, state_schema
    from agentflow.repair.nodetypes.state import ChosenRecord, RepairState

    spec, registry, _ = load_repair_workflow(load_repair_config([]))
    hints = typing.get_type_hints(state_schema(spec, registry_for(spec)))
    assert hints["ranked"] == list[list[str]] and hints["chosen"] == ChosenRecord | None
    assert hints["attempts"] is list  # declared by the workflow
    for node_type in registry.types.values():
        if node_type.needs == "repair":
            assert node_type.state is RepairState
