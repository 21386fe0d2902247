"""Search as a construct of the graph layer: a node's `search:` runs its `subgraph:` as branches, each a real
run of the subgraph with its own checkpoint thread; the stepwise strategies fork a branch's checkpoint into
its children. Values are read from the branch's state; the chosen branch's keys become the run's state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentflow.events import EventLog
from agentflow.graph import WorkflowRunner
from agentflow.graph.check.validation import validate
from agentflow.graph.define.loader import spec_from_dict
from agentflow.graph.run.context import RunHandles


def _workflow(search: dict[str, Any], nodes: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": "s",
        "state": {"task": {"type": "str"}, "answer": {"type": "str"}, "score": {"type": "int"},
                  "steps": {"type": "list", "reducer": "append"}, "report": {"type": "dict"}},
        "nodes": {
            "go": {"search": search, "output": "report", "next": "END",
                   "subgraph": {"name": "try", "nodes": nodes or {
                       "attempt": {"fn": "tests.graph.search_nodes:attempt", "next": "refine"},
                       "refine": {"fn": "tests.graph.search_nodes:refine", "next": "END"}}}},
        },
    }


async def _run(tmp_path: Path, wf: dict[str, Any]) -> tuple[Any, EventLog, WorkflowRunner]:
    events = EventLog()
    runner = WorkflowRunner(spec_from_dict(wf), run_dir=tmp_path / "run", context=RunHandles(events=events))
    result = await runner.start({"task": "x"}, thread_id="t")
    return result, events, runner


def _final(k: int) -> int:
    """Score of a whole run of branch b<k> (attempt then refine in the same branch)."""
    return (k * 37) % 10 + (k * 7) % 5


async def test_best_of_n_runs_n_whole_branches_and_takes_the_best(tmp_path: Path) -> None:
    result, events, runner = await _run(tmp_path, _workflow({"n": 4, "value": "score", "value_scale": 10}))
    report = result.state["report"]
    assert result.status == "done" and len(report["branches"]) == 4
    best = max(range(4), key=_final)
    assert report["chosen"] == f"b{best}" and result.state["score"] == _final(best)
    # the chosen branch's writes are the run's state (an append reducer gets the branch's items once)
    assert result.state["steps"] == [f"attempt b{best}", f"refine b{best}"]
    # each branch ran its nodes as graph nodes, in its own checkpoint thread
    starts = [e for e in events.events if e.kind == "node.start" and e.data.get("search") == "go"]
    assert sorted((e.data["branch"], e.node_id) for e in starts) == sorted(
        (f"b{k}", n) for k in range(4) for n in ("attempt", "refine"))
    branch_state = (await runner.result("t~go~b2")).state
    assert branch_state["score"] == _final(2) and branch_state["answer"] == "a2"
    runner.close()


async def test_beam_expands_from_the_parents_checkpoint(tmp_path: Path) -> None:
    search = {"strategy": "beam", "n": 1, "expand": 2, "value": "score", "max_depth": 3}
    result, _, runner = await _run(tmp_path, _workflow(search))
    report = result.state["report"]
    by_id = {b["id"]: b for b in report["branches"]}
    # step 1: b0, b1 from the root (attempt ran); the better is kept; step 2: two children of it (refine)
    assert [by_id[b]["parent"] for b in ("b0", "b1")] == ["root", "root"]
    kept = max(("b0", "b1"), key=lambda b: by_id[b]["value"])
    assert by_id["b2"]["parent"] == kept and by_id["b3"]["parent"] == kept
    assert all(by_id[b]["terminal"] for b in ("b2", "b3")) and not by_id["b0"]["terminal"]
    # a child continued its parent's run: the parent's attempt score plus the child's refinement
    parent_score = (int(kept[1:]) * 37) % 10
    assert result.state["score"] == max(parent_score + (k * 7) % 5 for k in (2, 3))
    assert result.state["steps"] == [f"attempt {kept}", f"refine {report['chosen']}"]
    runner.close()


async def test_rebase_shares_expansions_by_value(tmp_path: Path) -> None:
    search = {"strategy": "rebase", "n": 4, "expand": 2, "value": "score", "value_scale": 10, "temperature": 0.05}
    result, _, runner = await _run(tmp_path, _workflow(search))
    by_id = {b["id"]: b for b in result.state["report"]["branches"]}
    first = [b for b in by_id.values() if b["parent"] == "root"]
    assert len(first) == 4  # step 1: all n expansions from the root
    best = max(first, key=lambda b: b["value"])
    children = [b for b in by_id.values() if b["parent"] == best["id"]]
    # a low temperature gives (nearly) all of step 2's expansions to the best branch
    assert len(children) >= 3
    runner.close()


async def test_mcts_grows_the_tree_by_uct_with_concurrent_expansions(tmp_path: Path) -> None:
    search = {"strategy": "mcts", "n": 6, "expand": 2, "value": "score", "value_scale": 10, "concurrency": 2}
    result, events, runner = await _run(tmp_path, _workflow(search))
    report = result.state["report"]
    assert len(report["branches"]) == 6
    by_id = {b["id"]: b for b in report["branches"]}
    roots = [b for b in by_id.values() if b["parent"] == "root"]
    assert len(roots) == 2  # expand=2: the root takes two children, then UCT descends
    assert all(b["depth"] == 2 for b in by_id.values() if b["parent"] != "root")
    tree = [e for e in events.events if e.kind == "search.node"]
    assert {e.node_id for e in tree} == {"go", *(f"go/{b}" for b in by_id)}
    runner.close()


async def test_a_failed_branch_is_recorded_and_the_search_goes_on(tmp_path: Path) -> None:
    nodes = {"attempt": {"fn": "tests.graph.search_nodes:flaky", "next": "END"}}
    result, events, runner = await _run(tmp_path, _workflow({"n": 4, "value": "score"}, nodes))
    report = result.state["report"]
    assert result.status == "done" and report["chosen"] == "b2"
    errors = {b["id"]: b["error"] for b in report["branches"]}
    assert errors["b0"] is None and "b1 broke" in errors["b1"] and "b3 broke" in errors["b3"]
    ends = [e for e in events.events if e.kind == "search.branch" and e.data["event"] == "end"]
    assert sum(1 for e in ends if e.data["error"]) == 2
    runner.close()


async def test_a_search_whose_branches_all_fail_fails_its_node(tmp_path: Path) -> None:
    nodes = {"attempt": {"fn": "tests.graph.search_nodes:broken", "next": "END"}}
    result, _, runner = await _run(tmp_path, _workflow({"n": 2}, nodes))
    assert result.status == "failed" and result.failed_node == "go"
    assert "no branch of the search finished" in result.errors["go"].error
    assert "every branch breaks" in result.errors["go"].error
    runner.close()


async def test_a_search_the_budget_gives_no_branch_passes_the_state_on(tmp_path: Path) -> None:
    """The run's budget spent before the first branch: the search says so (a `search.decision`), makes none and
    the run goes on to the next node with the state as it came, its gathered lists too (what earlier nodes made
    is not lost to a search that could not run)."""
    from agentflow.budget import Budget

    wf = _workflow({"strategy": "mcts", "n": 3, "value": "score", "gather": ["steps"]})
    wf["nodes"] = {"seed": {"fn": "tests.graph.search_nodes:seed", "next": "go"},
                   "go": {**wf["nodes"]["go"], "next": "after"},
                   "after": {"fn": "tests.graph.search_nodes:tally", "next": "END"}}
    events = EventLog()
    runner = WorkflowRunner(spec_from_dict(wf), run_dir=tmp_path / "run",
                            context=RunHandles(events=events, budget=Budget(model_calls=0)))
    result = await runner.start({"task": "x"}, thread_id="t")
    report = result.state["report"]
    assert "go" not in result.errors and report["branches"] == [] and report["chosen"] == "root"
    assert result.state["answer"] == "made before the search" and result.state["steps"] == ["seed"]
    assert result.state["score"] == 1  # the node after the search ran on that state
    decisions = [e.data["decision"] for e in events.events if e.kind == "search.decision"]
    assert any("0 of n=3 expansions made: the run's budget (model_calls) is spent" in d for d in decisions), decisions
    runner.close()


async def test_vote_and_smallest_choose_by_a_state_path(tmp_path: Path) -> None:
    result, _, runner = await _run(tmp_path, _workflow({"n": 5, "select": "vote", "select_key": "answer"}))
    # answers a0, a1, a2, a0, a1 (k % 3): a0 and a1 tie on votes; the higher-valued branch's answer wins
    assert result.state["answer"] in ("a0", "a1")
    runner.close()


def _keyed(search: dict[str, Any]) -> dict[str, Any]:
    wf = _workflow(search)
    wf["state"]["algorithm"] = {"type": "str"}
    return wf


@pytest.mark.parametrize(("named", "runs"), [("tree_of_thought", "beam"), ("rebase", "rebase"), ("mcts", "mcts"),
                                             (None, "best_of_n")])
async def test_strategy_key_picks_the_strategy_from_the_state(tmp_path: Path, named: str | None, runs: str) -> None:
    search = {"strategy_key": "algorithm", "n": 2, "value": "score", "step_until": ["attempt"]}
    events = EventLog()
    runner = WorkflowRunner(spec_from_dict(_keyed(search)), run_dir=tmp_path / "run", context=RunHandles(events=events))
    result = await runner.start({"task": "x", **({"algorithm": named} if named else {})}, thread_id="t")
    assert result.status == "done", result.errors
    assert result.state["report"]["strategy"] == runs  # without a value there, `strategy` (best_of_n) runs
    tree = [e for e in events.events if e.kind == "search.node"]
    assert {e.data["strategy"] for e in tree} == {runs}
    if runs == "beam":  # stepwise: the second step continues a first step's checkpoint
        assert any(b["parent"] not in ("root", None) for b in result.state["report"]["branches"])
    runner.close()


async def test_strategy_key_naming_no_strategy_fails_the_node(tmp_path: Path) -> None:
    runner = WorkflowRunner(spec_from_dict(_keyed({"strategy_key": "algorithm"})), run_dir=tmp_path / "run")
    result = await runner.start({"task": "x", "algorithm": "annealing"}, thread_id="t")
    assert result.status == "failed" and result.failed_node == "go"
    assert "'annealing'" in result.errors["go"].error and "tree_of_thought" in result.errors["go"].error
    runner.close()


async def test_stop_at_ends_the_search_at_the_first_branch_valued_that_high(tmp_path: Path) -> None:
    search = {"n": 6, "value": "score", "value_scale": 10, "stop_at": 0.85, "concurrency": 1}
    result, events, runner = await _run(tmp_path, _workflow(search))
    report = result.state["report"]
    # b0 is worth 0, b1 0.9 >= 0.85: b2..b5 never start, and b1 is chosen
    assert [b["id"] for b in report["branches"]] == ["b0", "b1"]
    assert report["stopped_at"] == "b1" and report["chosen"] == "b1" and result.state["score"] == _final(1)
    started = {e.data["branch"] for e in events.events if e.kind == "node.start" and e.data.get("search") == "go"}
    assert started == {"b0", "b1"}
    assert [e.data["branch"] for e in events.events if e.kind == "search.stop"] == ["b1"]
    runner.close()
    # without stop_at every branch runs and the best of all six wins
    result, _, runner = await _run(tmp_path / "all", _workflow({**search, "stop_at": None}))
    assert len(result.state["report"]["branches"]) == 6 and result.state["report"]["stopped_at"] is None
    runner.close()


async def test_stop_at_is_reached_by_finished_branches_only(tmp_path: Path) -> None:
    # beam, step 1 (attempt) values b1 at 0.7, b2 at 0.4; both are unfinished, so the search goes on to step 2
    search = {"strategy": "beam", "n": 2, "expand": [3, 1], "value": "score", "value_scale": 10, "stop_at": 0.1,
              "concurrency": 1, "step_until": ["attempt"]}
    result, _, runner = await _run(tmp_path, _workflow(search))
    by_id = {b["id"]: b for b in result.state["report"]["branches"]}
    # expand [3, 1]: three first steps from the start, then one continuation of each of the two kept
    assert [b for b in by_id if by_id[b]["parent"] == "root"] == ["b0", "b1", "b2"]
    assert by_id["b3"]["parent"] == "b1" and by_id["b3"]["terminal"]
    # the first finished branch is over stop_at: the second kept branch's continuation never starts
    assert "b4" not in by_id and result.state["report"]["stopped_at"] == "b3"
    runner.close()


async def test_a_branch_knows_its_place_among_its_siblings(tmp_path: Path) -> None:
    nodes = {"attempt": {"fn": "tests.graph.search_nodes:sampled", "next": "refine"},
             "refine": {"fn": "tests.graph.search_nodes:sampled", "next": "END"}}
    search = {"strategy": "beam", "n": 1, "expand": [3, 2], "value": "score", "concurrency": 1}
    result, _, runner = await _run(tmp_path, _workflow(search, nodes))
    samples = {}
    for branch in result.state["report"]["branches"]:
        thread = (f"t~go~{branch['id']}" if branch["parent"] == "root" else
                  f"t~go~{branch['parent']}~{branch['id']}")
        samples[branch["id"]] = (await runner.result(thread)).state["steps"][-1]
    # the start's three children are samples 0, 1, 2; the kept one's two children are 0 and 1 again
    assert [samples[b] for b in ("b0", "b1", "b2")] == ["b0 sample 0", "b1 sample 1", "b2 sample 2"]
    assert [samples[b] for b in ("b3", "b4")] == ["b3 sample 0", "b4 sample 1"]
    runner.close()


def test_validation_names_bad_search_settings() -> None:
    bad = _workflow({"strategy": "annealing"})
    problems = [p.message for p in validate(spec_from_dict(bad))]
    assert any("search.strategy" in p and "best_of_n" in p for p in problems), problems
    wf = _workflow({"value": "nope.ok", "select": "vote", "step_until": ["missing"]})
    problems = [p.message for p in validate(spec_from_dict(wf))]
    assert any("search.value reads 'nope.ok'" in p for p in problems), problems
    assert any("search.select vote needs search.select_key" in p for p in problems), problems
    assert any("step_until names 'missing'" in p for p in problems), problems
    problems = [p.message for p in validate(spec_from_dict(_workflow({"strategy_key": "algo"})))]
    assert any("search.strategy_key reads 'algo'" in p for p in problems), problems
    problems = [p.message for p in validate(spec_from_dict(_workflow({"expand": []})))]
    assert any("search.expand" in p and "at least one number" in p for p in problems), problems
    problems = [p.message for p in validate(spec_from_dict(_workflow({"stop_at": "high"})))]
    assert any("search.stop_at" in p for p in problems), problems
    problems = [p.message for p in validate(spec_from_dict(_workflow({"executor": "dask"})))]
    assert any("search.executor" in p and "'in-process'" in p for p in problems), problems
    keyed = {"strategy_key": "algorithm", "expand": [3, 1], "stop_at": 1.0, "value": "score"}  # stop_at needs value
    assert validate(spec_from_dict(_keyed(keyed))) == []
    no_sub = {"name": "s", "nodes": {"go": {"search": {"n": 2}, "next": "END"}}}
    problems = [p.message for p in validate(spec_from_dict(no_sub))]
    assert any("no subgraph" in p for p in problems), problems
    ok = _workflow({"strategy": "mcts", "value": "score", "step_until": ["refine"]})
    assert validate(spec_from_dict(ok)) == []


@pytest.mark.parametrize(("flags", "message"), [
    (["--executor", "dask"], "--executor must be one of in-process, ray, got 'dask'"),
    (["--ray-address", "127.0.0.1:6379"], "--ray-address needs --executor ray"),
])
def test_bad_executor_flags_of_run_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       flags: list[str], message: str) -> None:
    from agentflow.cli.main import run

    wf = tmp_path / "wf.yaml"
    wf.write_text(json.dumps(_workflow({"n": 2, "value": "score"})))
    assert run(["run", str(wf), "-o", str(tmp_path / "runs"), "-i", '{"task": "x"}', *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_run_executor_in_process_runs_the_search_here(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--executor in-process` is the default made explicit: no Ray, the same search."""
    from agentflow.cli.main import run

    wf = tmp_path / "wf.yaml"
    wf.write_text(json.dumps(_workflow({"n": 3, "value": "score", "value_scale": 10})))
    reports = []
    for flags in ([], ["--executor", "in-process"]):
        code = run(["run", str(wf), "-o", str(tmp_path / "runs"), "--json", "-i", '{"task": "x"}', *flags])
        out = capsys.readouterr().out
        assert code == 0, out
        reports.append(json.loads(out.strip().splitlines()[-1])["state"]["report"])
    for report in reports:  # each run's branches have that run's threads
        assert all(b.pop("thread").endswith(f"~go~{b['id']}") for b in report["branches"])
    assert reports[0] == reports[1] and reports[0]["chosen"] == f"b{max(range(3), key=_final)}"


def test_cli_sets_search_settings_per_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agentflow.cli.main import run

    wf = tmp_path / "wf.yaml"
    wf.write_text(json.dumps(_workflow({"n": 2, "value": "score"})))
    code = run(["run", str(wf), "-o", str(tmp_path / "runs"), "--json", "-i", '{"task": "x"}',
                "-c", "nodes.go.strategy=mcts", "-c", "nodes.go.n=3"])
    out = capsys.readouterr().out
    assert code == 0, out
    state = json.loads(out.strip().splitlines()[-1])["state"]
    assert state["report"]["strategy"] == "mcts" and len(state["report"]["branches"]) == 3


async def test_python_builder_searches_over_a_workflow(tmp_path: Path) -> None:
    from agentflow.graph import Workflow
    from tests.graph.search_nodes import SearchState as State
    from tests.graph.search_nodes import attempt, refine

    inner = Workflow("try", state=State).node("attempt", attempt).node("refine", refine).edge("attempt", "refine")
    inner.edge("refine", "END")
    outer = Workflow("outer", state=State).search("go", inner, strategy="beam", n=2, value="score", output="report")
    outer.edge("go", "END")
    with pytest.raises(Exception, match="search.strategy"):
        Workflow("bad").search("go", inner, strategy="annealing")
    runner = WorkflowRunner(outer.spec, run_dir=tmp_path / "run")
    result = await runner.start({"task": "x"})
    assert result.status == "done" and result.state["report"]["strategy"] == "beam"
    chosen = result.state["report"]["chosen"]
    assert result.state["steps"][-1] == f"refine {chosen}"
    runner.close()


def test_graph_show_draws_a_search_node_as_a_box_of_its_subgraph(capsys: pytest.CaptureFixture[str]) -> None:
    from agentflow.cli.main import run

    assert run(["graph", "show", "plan_code_search"]) == 0
    out = capsys.readouterr().out
    assert 'subgraph attempt["attempt: search best_of_n' in out
    assert "attempt__code --> attempt__check" in out and "attempt__gate -.-> attempt__code" in out
    assert run(["graph", "show", "plangen"]) == 0  # a strategy read from the state is named by its path
    out = capsys.readouterr().out
    assert 'subgraph solve_code["solve_code: search by algorithm' in out
    assert "solve_code__start -.-> solve_code__write" in out and "solve_code__start -.-> solve_code__plan" in out


async def test_gather_collects_a_key_over_every_branch(tmp_path: Path) -> None:
    """`gather`: a list key of every branch, each item once (a child's list starts as its parent's), instead of
    the chosen branch's alone."""
    search = {"strategy": "beam", "n": 1, "expand": 2, "value": "score", "max_depth": 3, "gather": ["steps"]}
    result, _, runner = await _run(tmp_path, _workflow(search))
    by_id = {b["id"]: b for b in result.state["report"]["branches"]}
    kept = by_id["b2"]["parent"]
    assert kept in ("b0", "b1") and by_id["b3"]["parent"] == kept
    assert result.state["steps"] == ["attempt b0", "attempt b1", "refine b2", "refine b3"]
    runner.close()


def test_node_time_counts_concurrent_branches_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's node time is the wall time during which some typed node ran: two branches' nodes at once count
    once (the rest of the run's wall time is the engine's own)."""
    from agentflow.graph.run import context

    now = [0.0]
    monkeypatch.setattr(context.time, "perf_counter", lambda: now[0])
    clock = context.NodeClock()
    clock.start()          # branch b0's node, t=0
    now[0] = 1.0
    clock.start()          # branch b1's node, t=1
    now[0] = 3.0
    clock.stop()           # b0's ends, t=3
    now[0] = 4.0
    clock.stop()           # b1's ends, t=4: busy 0..4
    now[0] = 10.0
    clock.start()
    now[0] = 12.0
    clock.stop()
    assert clock.seconds == 6.0


async def test_a_branch_is_given_what_its_typed_nodes_read_though_the_state_does_not_declare_it(
        tmp_path: Path) -> None:
    """Typed nodes' keys are part of the state without `state:` naming them: the main line's writes reach the
    branches' nodes that read them (a repair's `base`, `ranked` and `plan` reach its `swe.edit`)."""
    from agentflow.graph.compile.nodetypes import workflow_registry
    from agentflow.graph.define.loader import load_workflow

    (tmp_path / "hintnodes.py").write_text(
        "from typing import TypedDict\n\nfrom agentflow.graph.compile.nodetypes import NodeType\n\n"
        "class Hint(TypedDict, total=False):\n    hint: str\n\n"
        "class Answer(TypedDict, total=False):\n    answer: str\n\n"
        "async def give(state, ctx, settings):\n    return {'hint': 'h1'}\n\n"
        "async def use(state, ctx, settings):\n    return {'answer': f\"saw {state.get('hint')}\"}\n\n"
        "NODE_TYPES = [NodeType('t.give', give, None, (), (Hint,)),\n"
        "              NodeType('t.use', use, None, (Hint,), (Answer,))]\n")
    flow = tmp_path / "flow.yaml"
    flow.write_text(json.dumps({
        "name": "f", "node_types": ["hintnodes.py"],
        "state": {"answer": {"type": "str"}, "report": {"type": "dict"}},
        "nodes": {"give": {"type": "t.give", "next": "go"},
                  "go": {"search": {"n": 2}, "output": "report", "next": "END",
                         "subgraph": {"name": "try", "nodes": {"use": {"type": "t.use", "next": "END"}}}}}}))
    spec = load_workflow(flow)
    runner = WorkflowRunner(spec, run_dir=tmp_path / "run",
                            context=RunHandles(events=EventLog(), node_types=workflow_registry(spec)))
    result = await runner.start({}, thread_id="t")
    assert result.status == "done" and result.state["answer"] == "saw h1"
    runner.close()
