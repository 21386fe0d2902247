"""`benchmarks/peers.py` (mini-swe-agent beside agentflow's repair): its arguments, the task subsets, the
mini-swe-agent driver's job and set-up helpers, and how per-task records and grades become the one JSON object.
No model and no container: the benchmark itself is run by hand (docs/measurements/peers.md)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
SWE = str(BENCH.parent / "examples" / "swe-tasks" / "tasks.jsonl")
REAL = str(BENCH.parent / "examples" / "real-tasks" / "tasks.jsonl")


def _load(name: str) -> ModuleType:
    # loaded from its file: putting benchmarks/ on sys.path would shadow names like `search` for every test
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclass-free, but argparse/typing look modules up by name
    spec.loader.exec_module(module)
    return module


sys.modules["_journal"] = _load("_journal")  # what peers imports from beside it (as when the script runs)
peers = _load("peers")
driver = _load("_peers_mini")


def test_defaults_run_both_systems_on_both_sets_at_twelve_calls():
    args = peers.parse_args([])
    assert [Path(p).parent.name for p in args.tasks] == ["swe-tasks", "real-tasks"]
    assert args.calls == 12 and args.limit is None and args.seed == 0
    assert args.concurrent is False  # one system after the other: each wall time is its own
    assert peers.systems(args) == ["mini-swe-agent", "agentflow:repair"]
    assert peers.MINI_PIN.startswith("mini-swe-agent==")
    more = peers.parse_args(["--systems", "agentflow", "--workflows", "repair,agentless"])
    assert peers.systems(more) == ["agentflow:repair", "agentflow:agentless"]


def test_mini_samples_as_its_configs_ship_unless_a_temperature_is_given():
    shipped = peers.mini_sampling(peers.parse_args([]))
    assert "temperature" not in shipped  # its SWE-bench configs send none: the server's own sampling
    assert (shipped["max_tokens"], shipped["seed"]) == (1024, 0)
    assert peers.mini_sampling(peers.parse_args(["--temperature", "0"]))["temperature"] == 0.0


@pytest.mark.parametrize("argv, message", [
    (["--limit", "0"], "--limit must be at least 1"),
    (["--calls", "0"], "--calls must be at least 1"),
    (["--systems", "swe-agent"], "--systems takes"),
    (["--tasks", "nowhere.jsonl"], "no such file"),
])
def test_bad_arguments_are_one_line_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exc:
        peers.parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_limit_draws_a_seeded_subset_of_each_file_in_file_order():
    every = peers.select_tasks([SWE, REAL], None, 0)
    assert len(every) == 15 + 23
    two = peers.select_tasks([SWE, REAL], 2, 0)
    assert [Path(p).parent.name for p, _ in two] == ["swe-tasks", "swe-tasks", "real-tasks", "real-tasks"]
    assert [t.instance_id for _, t in two] == [t.instance_id for _, t in peers.select_tasks([SWE, REAL], 2, 0)]
    order = [t.instance_id for _, t in every]
    picked = [t.instance_id for _, t in two]
    assert picked == sorted(picked, key=order.index)
    others = {t.instance_id for seed in range(1, 6) for _, t in peers.select_tasks([SWE, REAL], 2, seed)}
    assert others - set(picked)  # another seed, another subset


def test_figures_count_submissions_candidates_calls_tokens_and_wall():
    mini = {
        "a": peers.record(patch="", candidates=["diff-a1"], calls=12, tokens=9000, wall_s=100.0, status="LimitsExceeded"),
        "b": peers.record(patch="diff-b1", candidates=["diff-b1"], calls=5, tokens=4000, wall_s=50.0, status="Submitted"),
    }
    agentflow = {
        "a": peers.record(patch="diff-a1", candidates=["diff-a1", "diff-a2", ""], calls=11, tokens=20000, wall_s=300.0,
                          status="submitted"),
        "b": peers.record(patch="diff-b2", candidates=["diff-b3"], calls=12, tokens=25000, wall_s=400.0,
                          status="submitted"),
    }
    assert agentflow["a"]["candidates"] == ["diff-a2"]  # the submission and empty patches are no other candidates
    assert mini["b"]["candidates"] == []
    results = {"mini-swe-agent": mini, "agentflow:repair": agentflow}
    assert peers.patches_to_grade(results) == {"a": ["diff-a1", "diff-a2"], "b": ["diff-b1", "diff-b2", "diff-b3"]}
    resolving = {("a", "diff-a1"), ("b", "diff-b3")}
    fm = peers.figures(peers.task_rows(mini, resolving))
    assert (fm["resolved"], fm["coverage"], fm["covered_ids"], fm["submitted"]) == (0, 1, ["a"], 1)
    assert (fm["calls"], fm["calls_mean"], fm["tokens"], fm["wall_s"]) == (17, 8.5, 13000, 150.0)
    assert fm["statuses"] == {"LimitsExceeded": 1, "Submitted": 1}
    fa = peers.figures(peers.task_rows(agentflow, resolving))
    assert (fa["resolved"], fa["resolved_ids"], fa["coverage"], fa["resolve_rate"]) == (1, ["a"], 2, 0.5)

    args = peers.parse_args(["--tasks", SWE, "--limit", "2", "--seed", "3"])
    chosen = [(SWE, type("T", (), {"instance_id": iid})()) for iid in ("a", "b")]
    out = peers.assemble(args, chosen, results, resolving, model="qwen2.5-coder-1.5b")
    json.dumps(out)  # one JSON object
    assert out["tasks"] == ["examples/swe-tasks/tasks.jsonl"] and (out["limit"], out["seed"]) == (2, 3)
    assert out["instances"] == ["a", "b"] and out["calls_per_task"] == 12 and out["concurrent"] is False
    assert out["systems"]["agentflow:repair"]["resolved"] == 1 and out["systems"]["mini-swe-agent"]["coverage"] == 1
    assert out["per_task"]["a"]["agentflow:repair"]["resolved"] is True
    assert out["per_task"]["a"]["mini-swe-agent"] == {"resolved": False, "covered": True, "submitted": False,
                                                      "calls": 12, "tokens": 9000, "wall_s": 100.0,
                                                      "status": "LimitsExceeded", "candidates": 1}


def _object_of(ids: list[str], results: dict, resolving: set, argv: list[str]) -> dict:
    args = peers.parse_args(["--tasks", SWE, *argv])
    chosen = [(SWE, type("T", (), {"instance_id": iid})()) for iid in ids]
    return json.loads(json.dumps(peers.assemble(args, chosen, results, resolving, model="m")))


def test_parts_interleave_the_tasks_and_their_objects_merge_into_the_whole_run_s():
    chosen = [("f", i) for i in range(7)]
    parts = [peers.part_of(chosen, (k, 3)) for k in (1, 2, 3)]
    assert parts == [[("f", 0), ("f", 3), ("f", 6)], [("f", 1), ("f", 4)], [("f", 2), ("f", 5)]]
    assert peers.part_of(chosen, None) == chosen

    def rec(patch: str, calls: int) -> dict:
        return peers.record(patch=patch, calls=calls, tokens=10 * calls, wall_s=float(calls), status="done")

    results = {"mini-swe-agent": {"a": rec("", 12), "b": rec("pb", 12), "c": rec("pc", 6)},
               "agentflow:repair": {"a": rec("pa", 8), "b": rec("pb", 9), "c": rec("pc2", 10)}}
    resolving = {("a", "pa"), ("b", "pb"), ("c", "pc")}
    whole = _object_of(["a", "b", "c"], results, resolving, [])
    one = _object_of(["a", "c"], {n: {i: r[i] for i in "ac"} for n, r in results.items()}, resolving, ["--part", "1/2"])
    two = _object_of(["b"], {n: {"b": r["b"]} for n, r in results.items()}, resolving, ["--part", "2/2"])
    merged = peers.merge([one, two])
    assert merged["systems"] == whole["systems"] and merged["per_task"] == {i: whole["per_task"][i] for i in "acb"}
    assert merged["parts"] == [[1, 2], [2, 2]] and merged["instances"] == ["a", "c", "b"]
    assert merged["commits"] == [one["commit"], two["commit"]] and one["commit"]  # each part says what code ran
    with pytest.raises(ValueError, match="a task is in two parts"):
        peers.merge([one, one])
    with pytest.raises(ValueError, match="differ in 'calls_per_task'"):
        peers.merge([one, {**two, "calls_per_task": 6}])


def test_merge_from_the_command_line_prints_one_object_or_one_line_naming_the_difference(tmp_path, capsys):
    rec = peers.record(patch="p", calls=3, tokens=30, wall_s=3.0, status="done")
    files = []
    for k, iid in enumerate("ab", start=1):
        files.append(tmp_path / f"{iid}.json")
        files[-1].write_text(json.dumps(_object_of([iid], {"agentflow:repair": {iid: rec}}, {(iid, "p")},
                                                   ["--part", f"{k}/2"])))
    assert peers.main(["--merge", *map(str, files)]) == 0
    merged = json.loads(capsys.readouterr().out)
    assert merged["systems"]["agentflow:repair"]["resolved"] == 2 and merged["instances"] == ["a", "b"]
    assert peers.main(["--merge", str(files[0]), str(files[0])]) == 2
    err = capsys.readouterr().err
    assert err.startswith("peers: cannot merge: a task is in two parts") and err.count("\n") == 1


@pytest.mark.parametrize(("argv", "message"), [
    (["--part", "3/2"], "K/N needs 1 <= K <= N"),
    (["--part", "two"], "expected K/N"),
    (["--merge", "no-such.json"], "--merge no-such.json: no such file"),
])
def test_bad_part_and_merge_arguments_are_one_line_errors(argv: list[str], message: str,
                                                          capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exit_info:
        peers.parse_args(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_the_driver_points_mini_swe_agent_at_the_served_model_with_the_call_limit(monkeypatch: pytest.MonkeyPatch):
    config = {"agent": {"system_template": "s", "instance_template": "i", "step_limit": 250, "cost_limit": 3.0},
              "model": {"model_name": "anthropic/x", "observation_template": "o",
                        "model_kwargs": {"drop_params": True, "parallel_tool_calls": True}}}
    job = {"step_limit": 12, "model_name": "openai/qwen", "api_base": "http://127.0.0.1:9/v1",
           "sampling": {"temperature": 0.0, "max_tokens": 1024}}
    monkeypatch.setenv("PEERS_API_KEY", "af-key")
    agent = driver.agent_config(config, job)
    assert (agent["step_limit"], agent["cost_limit"], agent["system_template"]) == (12, 0.0, "s")
    model = driver.model_config(config, job)
    assert model["model_name"] == "openai/qwen" and model["model_class"] == "litellm_textbased"
    assert model["observation_template"] == "o" and model["cost_tracking"] == "ignore_errors"
    assert model["model_kwargs"] == {"drop_params": True, "api_base": "http://127.0.0.1:9/v1", "api_key": "af-key",
                                     "temperature": 0.0, "max_tokens": 1024}


def test_the_driver_sets_up_the_container_as_agentflow_test_runs_are():
    assert driver.python_path("/testbed", True) == f"/testbed:/testbed/src:{driver.SITE}"
    assert driver.python_path("/testbed", False) == f"/testbed:{driver.SITE}"
    listed = driver.install_command(["packaging==24.1", "pytest-cov==5.0.0"])
    assert "--no-index" in listed and "--no-deps" in listed and listed.endswith("packaging==24.1 pytest-cov==5.0.0")
    assert driver.install_command([]).endswith(f"{driver.WHEELS}/*.whl")  # no list: every wheel of the wheelhouse
    messages = [
        {"role": "system", "content": "s"},
        {"role": "assistant", "content": "a", "extra": {"response": {"usage": {"prompt_tokens": 100,
                                                                                "completion_tokens": 20}}}},
        {"role": "user", "content": "format error", "extra": {"response": {"usage": {"prompt_tokens": 130,
                                                                                      "completion_tokens": 7}}}},
        {"role": "user", "content": "observation", "extra": {"raw_output": "x"}},
    ]
    assert driver.usage_tokens(messages) == (230, 27)
