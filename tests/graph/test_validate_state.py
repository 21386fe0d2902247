"""Validation knows the state: every key a node reads or writes by name (an agent's `args.input` and `output:`,
a tool node's `{key}` arguments, a typed node's `settings.input`, an interrupt's `show:`, `writes:`) is
checked against the declared state (`state:` plus the keys typed nodes use, or the Python state class); a
run's input and an edit may set only declared keys, from Python as from the CLI; unknown names get the
nearest one suggested."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

import pytest
from pydantic import BaseModel

from agentflow.cli.main import run
from agentflow.errors import UserError
from agentflow.graph import END, Workflow, WorkflowRunner, spec_from_dict, validate
from agentflow.graph.compile.compiler import initial_state
from agentflow.graph.define.loader import load_workflow

STATE = {"task": {"type": "str"}, "plan": {"type": "dict"}, "code": {"type": "dict"}}


def problems(nodes: dict[str, Any], state: dict[str, Any] | None = None, **extra: Any) -> list[str]:
    spec = spec_from_dict({"name": "w", "state": STATE if state is None else state, "nodes": nodes, **extra})
    return [p.message for p in validate(spec) if p.kind == "unknown-field"]


def agent(**fields: Any) -> dict[str, Any]:
    return {"agent": "critic", "next": "END", **fields, "args": {"config": {"tools": []}, **fields.get("args", {})}}


def test_an_agent_output_the_state_does_not_declare_is_a_problem() -> None:
    assert problems({"plan": agent(output="plan")}) == []
    (typo,) = problems({"plan": agent(output="plna")})
    assert "node 'plan' writes its result to 'plna' (output:), which the state does not declare" in typo
    assert "did you mean 'plan'?" in typo
    # without output: the result goes to the node's name, which must be declared too
    (default,) = problems({"review": agent()})
    assert "'review' (output: defaults to the node's name)" in default and "declare it under state:" in default


def test_an_agent_input_the_state_does_not_declare_is_a_problem() -> None:
    assert problems({"code": agent(args={"input": {"task": "task", "summary": "plan.goal"}})}) == []
    (var,) = problems({"code": agent(args={"input": {"task": "taks"}})})
    assert "node 'code' reads 'taks' (args.input.task)" in var and "did you mean 'task'?" in var
    (dotted,) = problems({"code": agent(args={"input": {"s": "pln.goal"}})})  # a dotted path's first part
    assert "reads 'pln' (args.input.s)" in dotted and "did you mean 'plan'?" in dotted
    (one_key,) = problems({"code": agent(args={"input": "tsk"})})
    assert "reads 'tsk' (args.input)" in one_key
    (default,) = problems({"code": agent()}, state={"goal": {"type": "str"}, "code": {"type": "dict"}})
    assert "reads 'task' (its task: args.input defaults to 'task')" in default


def test_tool_interrupt_writes_and_typed_settings_keys_are_checked() -> None:
    found = problems({
        "calc": {"tool": "calculate", "args": {"expression": "{plan} + {cod}"}, "output": "code", "next": "ok"},
        "ok": {"interrupt": "go on?", "show": ["plan", "tsak"], "next": "gate"},
        "gate": {"fn": "agentflow.workflows.demo:review_gate", "writes": ["verdict"], "next": "c"},
        "c": {"type": "reason.constraints", "settings": {"input": "promt"}, "next": "END"},
    }, state={**STATE, "prompt": {"type": "str"}})
    assert len(found) == 4, found
    assert "node 'calc' reads 'cod' (args.expression)" in found[0] and "did you mean 'code'?" in found[0]
    assert "node 'ok' shows 'tsak' (show:)" in found[1] and "did you mean 'task'?" in found[1]
    assert "node 'gate' writes 'verdict' (writes:)" in found[2]
    assert "node 'c' reads 'promt' (settings.input)" in found[3] and "did you mean 'prompt'?" in found[3]


def test_keys_typed_nodes_read_and_write_count_as_declared(capsys: pytest.CaptureFixture[str]) -> None:
    # reason.constraints writes `constraints`; nothing under state: names it, yet a run keeps it
    assert run(["graph", "types"]) == 0
    listing = capsys.readouterr().out
    assert "state: reads prompt; writes constraints" in listing.split("reason.constraints", 1)[1].split("\n")[2]
    nodes = {"c": {"type": "reason.constraints", "next": "use"},
             "use": agent(args={"input": {"task": "prompt", "constraints": "constraints"}}, output="answer"),
             }
    assert problems(nodes, state={"prompt": {"type": "str"}, "answer": {"type": "dict"}},
                    routes=[{"source": "c", "when": {"constraints == 0": END}, "default": "use"}]) == []
    (typo,) = problems({**nodes, "use": agent(args={"input": {"c": "constraint"}}, output="answer")},
                       state={"prompt": {"type": "str"}, "answer": {"type": "dict"}})
    assert "'constraint'" in typo and "did you mean 'constraints'?" in typo


def test_routes_are_checked_against_the_same_keys() -> None:
    (on,) = problems({"a": {"fn": "agentflow.workflows.demo:prepare"}},
                     routes=[{"source": "a", "on": "plna", "cases": {"x": "END"}}])
    assert "route from 'a' is on state field 'plna'" in on and "did you mean 'plan'?" in on


def test_a_workflow_without_state_is_not_checked() -> None:
    # its state is only the keys its typed nodes use: nothing to check a name against (docs/concepts/workflows.md)
    assert problems({"review": agent(output="anything")}, state={}) == []


def test_node_types_read_from_text_leave_the_keys_unchecked_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "mynodes.py").write_text(
        "from typing import TypedDict\n\nfrom agentflow.graph.compile.nodetypes import NodeType\n\n"
        "class Task(TypedDict, total=False):\n    task: str\n\n"
        "class Found(TypedDict, total=False):\n    found: int\n\n"
        "async def step(state, ctx, settings):\n    return {'found': 1}\n\n"
        "NODE_TYPES = [NodeType('my.step', step, None, (Task,), (Found,))]\n")
    flow = tmp_path / "flow.yaml"
    flow.write_text(json.dumps({"name": "f", "state": {"task": {"type": "str"}, "out": {"type": "dict"}},
                                "node_types": ["mynodes.py"], "nodes": {
                                    "s": {"type": "my.step", "next": "a"},
                                    "a": agent(args={"input": {"task": "found"}}, output="out")}}))
    notes: list[str] = []
    assert validate(load_workflow(flow), notes=notes) == []  # `found` may come from my.step: not a problem
    assert any("state keys" in n and "not checked without --import-code" in n for n in notes), notes
    assert validate(load_workflow(flow), import_code=True) == []  # imported: my.step declares it
    flow.write_text(flow.read_text().replace('"found"}', '"fund"}'))
    (typo,) = validate(load_workflow(flow), import_code=True)
    assert "'fund'" in typo.message and "did you mean 'found'?" in typo.message


class TaskState(TypedDict, total=False):
    task: str
    answer: dict


class TaskModel(BaseModel):
    task: str = ""
    answer: dict = {}


def echo(state: Any) -> dict[str, Any]:
    task = state["task"] if isinstance(state, dict) else state.task
    return {"answer": {"text": task}}


@pytest.mark.parametrize("state_class", [TaskState, TaskModel])
def test_a_python_state_class_is_the_declared_state(state_class: type) -> None:
    wf = Workflow("py", state=state_class).agent("review", "critic", output="anwser", config={"tools": []})
    wf.edge("review", END)
    (typo,) = [p.message for p in validate(wf.spec)]
    assert "'anwser'" in typo and f"did you mean 'answer'? (or add it to the state class {state_class.__name__})" in typo


@pytest.mark.parametrize("state_class", [TaskState, TaskModel])
async def test_python_start_and_edit_reject_undeclared_keys(state_class: type, tmp_path: Path) -> None:
    wf = Workflow("py", state=state_class).node("echo", echo).edge("echo", END)
    wf.interrupt_before = ["echo"]
    async with WorkflowRunner(wf.spec, run_dir=tmp_path) as runner:
        with pytest.raises(UserError, match=r"input sets 'taks', which workflow 'py' does not declare; did you mean 'task'\?"):
            await runner.start({"taks": "x"})
        paused = await runner.start({"task": "x"}, thread_id="t")
        with pytest.raises(UserError, match="did you mean 'answer'"):
            await runner.resume("t", edit={"answr": {}})
        result = await runner.resume(paused.thread_id, approve=True)
    assert result.state["answer"] == {"text": "x"}


def test_input_may_set_what_typed_nodes_use_and_nothing_else() -> None:
    spec = spec_from_dict({"name": "d", "state": {"prompt": {"type": "str"}},
                           "nodes": {"c": {"type": "reason.constraints", "next": "END"}}})
    assert initial_state(spec, {"prompt": "p", "constraints": ["a"]}) == {"prompt": "p", "constraints": ["a"]}
    with pytest.raises(UserError, match="'promt'.*did you mean 'prompt'"):
        initial_state(spec, {"promt": "p"})


def test_the_cli_refuses_an_undeclared_input_key_before_any_model_call(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    flow = tmp_path / "flow.yaml"
    flow.write_text(json.dumps({"name": "f", "state": {"task": {"type": "str"}, "out": {"type": "dict"}},
                                "nodes": {"a": agent(args={"input": {"task": "tsk"}}, output="out")}}))
    assert run(["graph", "validate", str(flow)]) == 2
    assert "node 'a' reads 'tsk' (args.input.task)" in capsys.readouterr().err
    # /dev/null is no cassette: a model call would fail differently; validation stops the run first
    assert run(["run", str(flow), "-m", "replay:/dev/null", "-o", str(tmp_path / "runs"), "-i", '{"task": "x"}']) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("agentflow: error: f: node 'a' reads 'tsk'") and "\n" not in err
    assert not list((tmp_path / "runs").glob("*/events.jsonl"))


def test_unknown_names_get_the_nearest_one_suggested(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def messages(spec: dict[str, Any]) -> str:
        return " | ".join(p.message for p in validate(spec_from_dict({"name": "w", "state": STATE, **spec})))

    assert "unknown node 'chek'; did you mean 'check'?" in messages(
        {"nodes": {"check": {"fn": "agentflow.workflows.demo:prepare", "next": "chek"}}})
    assert "on_error refers to unknown node 'fixx'; did you mean 'fix'?" in messages(
        {"nodes": {"a": agent(output="plan", on_error="fixx"), "fix": {"fn": "agentflow.workflows.demo:prepare"}}})
    assert "unknown type 'swe.edti'; did you mean 'swe.edit'?" in messages({"nodes": {"e": {"type": "swe.edti"}}})
    assert "unknown option 'inptu'; did you mean 'input'?" in messages(
        {"nodes": {"a": agent(output="plan", args={"inptu": "task"})}})
    assert "max_tokenz: Extra inputs are not permitted; did you mean 'max_tokens'?" in messages(
        {"nodes": {"a": agent(output="plan", args={"config": {"max_tokenz": 5}})}})
    with pytest.raises(UserError, match=r"nodes\.a\.ouput: Extra inputs are not permitted; did you mean 'output'\?"):
        spec_from_dict({"name": "w", "nodes": {"a": {"fn": "m:f", "ouput": "x"}}})
    with pytest.raises(UserError, match=r"state\.task\.tpye: .*did you mean 'type'\?"):
        spec_from_dict({"name": "w", "state": {"task": {"tpye": "str"}}, "nodes": {"a": {"fn": "m:f"}}})
    # -c typos on the command line: the run's options and a typed node's settings
    assert run(["run", "demo", "-o", str(tmp_path), "-c", "keep_lsat=3"]) == 2
    assert "keep_lsat: Extra inputs are not permitted; did you mean 'keep_last'?" in capsys.readouterr().err
    assert run(["run", "decrim", "-m", "replay:/dev/null", "-o", str(tmp_path), "-c", "nodes.refinement.code_fxi=0",
                "-i", '{"prompt": "x"}']) == 2
    assert "settings.code_fxi: Extra inputs are not permitted; did you mean 'code_fix'?" in capsys.readouterr().err
    assert run(["run", "decrim", "-m", "replay:/dev/null", "-o", str(tmp_path), "-c", "nodes.refin.n=1"]) == 2
    assert "has no typed or search node 'refin'; did you mean 'refine'?" in capsys.readouterr().err


class TaskKey(TypedDict, total=False):
    task: str


class FoundKey(TypedDict, total=False):
    found: list[int]


class LostKey(TypedDict, total=False):
    lost: int


class StepState(TaskKey, FoundKey, total=False):
    """The keys of a node type's state, in groups its reads and writes are made of."""


def test_a_node_types_state_types_its_keys_in_the_schema() -> None:
    """A node type that names its state (a TypedDict) gives the keys it reads and writes their types in the
    workflow's state schema (a key the workflow declares keeps its type); a key its state lacks is an error."""
    import typing

    from agentflow.errors import ConfigError
    from agentflow.graph.compile.compiler import state_schema
    from agentflow.graph.compile.nodetypes import NodeType, NodeTypeRegistry

    async def step(state: StepState, ctx: Any, settings: None) -> StepState:
        return {"found": [len(state.get("task") or "")]}

    registry = NodeTypeRegistry()
    registry.register(NodeType("my.step", step, None, (TaskKey,), (FoundKey,), state=StepState))
    spec = spec_from_dict({"name": "w", "state": {"task": {"type": "str"}}, "nodes": {"s": {"type": "my.step"}}})
    hints = typing.get_type_hints(state_schema(spec, registry))
    assert hints == {"task": str, "found": list[int]}
    with pytest.raises(ConfigError, match="my.other: its state StepState has no key 'lost'"):
        NodeType("my.other", step, None, (TaskKey,), (LostKey,), state=StepState)


class OtherDeps:
    """The deps of a library other than the repair's."""


def test_a_workflow_whose_typed_nodes_need_different_deps_is_a_problem_at_load() -> None:
    """One run has one `deps`: a workflow mixing a repair step (its context carries a `RepairRuntime`) with a
    node type whose context carries other deps, a search's branches included, is refused when it is loaded;
    node types that take no deps mix with either."""
    from agentflow.graph.compile.nodetypes import NodeType, default_registry

    async def step(state: StepState, ctx: Any, settings: None) -> StepState:
        return {}

    registry = default_registry().with_modules([])
    registry.register(NodeType("my.step", step, None, (TaskKey,), (FoundKey,), state=StepState, deps=OtherDeps))
    mixed = {"name": "w", "nodes": {"base": {"type": "swe.baseline", "next": "go"},
                                    "go": {"search": {"n": 2}, "next": "END", "subgraph": {
                                        "name": "b", "nodes": {"s": {"type": "my.step", "next": "END"}}}}}}
    found = [p.message for p in validate(spec_from_dict(mixed), registry=registry) if p.kind == "deps-conflict"]
    assert found == [("w: node types swe.baseline and my.step need different deps (RepairRuntime, OtherDeps): one "
                      "run has one; use node types of one library in a workflow")]
    from agentflow.graph.check.validation import check_workflow

    with pytest.raises(UserError, match="need different deps"):
        check_workflow(spec_from_dict(mixed), registry)
    alone = {"name": "w", "nodes": {"base": {"type": "swe.baseline", "next": "s"},
                                    "s": {"type": "reason.constraints", "next": "END"}}}
    assert [p for p in validate(spec_from_dict(alone), registry=registry) if p.kind == "deps-conflict"] == []
