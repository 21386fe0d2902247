"""Validation before running: each problem kind, named nodes, the CLI's exit codes and Mermaid output."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, TypedDict

import pytest

from agentflow.cli.main import run
from agentflow.graph import END, Workflow, spec_from_dict, to_mermaid, validate


def noop(state: dict) -> dict:
    return {}


def kinds(spec) -> list[str]:
    return [p.kind for p in validate(spec)]


def test_sound_workflow_has_no_problems() -> None:
    wf = Workflow("ok").node("a", noop).node("b", noop).edge("a", "b").edge("b", END)
    assert validate(wf.spec) == []


def test_unknown_node_is_named() -> None:
    wf = Workflow("w").node("a", noop).edge("a", "ghost")
    problems = validate(wf.spec)
    assert [p.kind for p in problems] == ["unknown-node", "no-path-to-end"]
    assert "'ghost'" in problems[0].message and "edge a -> ghost" in problems[0].message
    assert "node 'a' has no path to END" in problems[1].message


def test_unreachable_node() -> None:
    wf = Workflow("w").node("a", noop).node("island", noop).edge("a", END).edge("island", END)
    problems = validate(wf.spec)
    assert [p.kind for p in problems] == ["unreachable"]
    assert "'island'" in problems[0].message and "start node 'a'" in problems[0].message


def test_no_path_to_end() -> None:
    wf = Workflow("w").node("a", noop).node("sink", noop).edge("a", "sink")
    wf.step_limit = 10  # a self-contained sink is not a cycle; only the missing exit is reported
    problems = validate(wf.spec)
    assert [p.kind for p in problems] == ["no-path-to-end"]
    assert "'sink'" in problems[0].message


def test_cycle_without_conditional_exit_or_step_limit() -> None:
    wf = Workflow("w").node("a", noop).node("b", noop).node("c", noop)
    wf.edge("a", "b").edge("b", "a").edge("a", "c").edge("c", END)
    problems = validate(wf.spec)
    assert [p.kind for p in problems] == ["endless-cycle"]
    assert "a, b" in problems[0].message and "step_limit" in problems[0].message
    wf.step_limit = 20
    assert validate(wf.spec) == []


def test_cycle_with_conditional_exit_is_fine() -> None:
    wf = Workflow("w").node("a", noop).route("a", on="status", cases={"again": "a", "done": END})
    assert validate(wf.spec) == []


def test_parallel_branches_writing_same_key_without_reducer() -> None:
    class State(TypedDict, total=False):
        notes: list
        tally: Annotated[list, operator.add]

    wf = Workflow("w", state=State).node("src", noop)
    wf.node("left", noop, writes=["notes", "tally"]).node("right", noop, writes=["notes", "tally"]).node(
        "j", noop
    )
    wf.parallel("src", ["left", "right"], join="j").edge("j", END)
    problems = validate(wf.spec)
    assert [p.kind for p in problems] == ["parallel-write-conflict"]
    msg = problems[0].message
    assert "'left'" in msg and "'right'" in msg and "'notes'" in msg and "reducer" in msg


class Out(TypedDict):
    answer: str


def test_writes_inferred_from_return_annotation() -> None:
    def left(state: dict) -> Out:
        return {"answer": "l"}

    def right(state: dict) -> Out:
        return {"answer": "r"}

    wf = Workflow("w").node("s", noop).node("left", left).node("right", right).node("j", noop)
    wf.parallel("s", ["left", "right"], join="j").edge("j", END)
    assert kinds(wf.spec) == ["parallel-write-conflict"]


def test_yaml_problems_and_unknown_route_field() -> None:
    spec = spec_from_dict(
        {
            "name": "y",
            "state": {"status": {"type": "str"}, "items": {"type": "list"}},
            "nodes": {
                "a": {
                    "fn": "tests.graph.test_validate:noop",
                    "route": {"on": "stat", "cases": {"x": "b", "y": "END"}},
                },
                "b": {"fn": "tests.graph.test_validate:noop", "next": "nowhere"},
                "c": {"fn": "tests.graph.test_validate:noop", "agent": "coder", "next": "END"},
            },
        }
    )
    got = kinds(spec)
    assert "unknown-field" in got and "unknown-node" in got and "bad-node" in got and "unreachable" in got


def test_subgraph_problems_are_prefixed() -> None:
    inner = Workflow("inner").node("x", noop).edge("x", "missing")
    outer = Workflow("outer").subgraph("sub", inner).edge("sub", END)
    problems = validate(outer.spec)
    assert any("node 'sub' > inner" in p.message and "'missing'" in p.message for p in problems)


def test_cli_validate_prints_all_problems_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "name: bad\nnodes:\n"
        "  a: {fn: 'tests.graph.test_validate:noop', next: ghost}\n"
        "  b: {fn: 'tests.graph.test_validate:noop', next: END}\n"
    )
    assert run(["graph", "validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3  # unknown node, a has no path to end, b unreachable
    assert all(line.startswith("agentflow: error: bad: ") for line in err)
    assert run(["graph", "validate", "demo"]) == 0


def test_cli_show_prints_mermaid(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["graph", "show", "demo"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("flowchart TD")
    assert 'draft -. "status=again" .-> draft' in out
    assert "prepare ==> outline" in out


def test_mermaid_marks_interrupts() -> None:
    wf = Workflow("w").interrupt("ok?", "approve?").edge("ok?", END)
    assert 'ok_{{"ok?"}}' in to_mermaid(wf.spec)


def test_bad_import_path_is_reported() -> None:
    spec = spec_from_dict(
        {"name": "imp", "nodes": {"a": {"fn": "tests.graph.nodes:does_not_exist", "next": "END"}}}
    )
    problems = validate(spec)
    assert [p.kind for p in problems] == ["bad-import"]
    assert "node 'a'" in problems[0].message and "does_not_exist" in problems[0].message


@pytest.mark.parametrize("import_code", [False, True])
def test_a_path_naming_no_module_is_the_same_one_line_read_or_imported(import_code: bool) -> None:
    spec = spec_from_dict({"name": "imp", "nodes": {"a": {"fn": "no_module_here", "next": "END"}}})
    problems = validate(spec, import_code=import_code)
    assert [p.kind for p in problems] == ["bad-import"]
    assert "bad import path 'no_module_here': expected 'pkg.module:function'" in problems[0].message


def test_importing_agentflow_and_the_builder_stays_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys, agentflow, agentflow.graph\n"
        "from agentflow.graph import Workflow, END\n"
        "Workflow('w').node('a', print).edge('a', END)\n"
        "heavy = [m for m in ('langgraph', 'networkx', 'langchain_core') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_route_conditions_are_checked() -> None:
    base = {
        "name": "c",
        "state": {"count": {"type": "int"}, "rounds": {"type": "int"}},
        "nodes": {"a": {"fn": "tests.graph.test_validate:noop"}},
    }
    good = spec_from_dict(
        {**base, "routes": [{"source": "a", "when": {"count >= rounds": "END"}, "default": "a"}]}
    )
    assert validate(good) == []
    bad = spec_from_dict(
        {
            **base,
            "routes": [
                {"source": "a", "when": {"__import__('os')": "END", "cuont > 1": "END"}, "default": "a"}
            ],
        }
    )
    problems = validate(bad)
    assert [p.kind for p in problems] == ["bad-route", "unknown-field"]
    assert "Call" in problems[0].message and "cuont" in problems[1].message
    no_default = spec_from_dict({**base, "routes": [{"source": "a", "when": {"count > 1": "END"}}]})
    assert [p.kind for p in validate(no_default)] == ["bad-route"]
