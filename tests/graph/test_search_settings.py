"""Every search setting is honoured, refused, or said to be ignored: generated over strategies x settings.

For each strategy and each setting of `SearchSettings` given alone, the workflow either fails validation with
one line naming the setting and its fix, or runs with the setting read, or runs and emits a `search.decision`
event naming the setting as ignored. MCTS makes its `n` expansions even when the `expand` children per node
fill the tree (every branch finishing at once): it widens the best open node and says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentflow.cli.main import run
from agentflow.events import EventLog
from agentflow.graph import WorkflowRunner
from agentflow.graph.check.validation import validate
from agentflow.graph.define.loader import spec_from_dict
from agentflow.graph.run.context import RunHandles
from agentflow.graph.search.settings import SearchSettings

STRATEGIES = ("best_of_n", "beam", "tot", "rebase", "mcts")

VALUES: dict[str, Any] = {
    "strategy_key": "answer", "n": 3, "expand": 3, "max_depth": 2, "step_until": ["attempt"], "value": "score",
    "tests": "answer", "value_scale": 10.0, "select": "vote", "select_key": "answer", "outputs": ["answer"], "gather": ["steps"],
    "concurrency": 1, "c": 2.0, "temperature": 0.5, "stop_at": 0.5, "seed": 3, "executor": "in-process",
}
"""A valid value for each setting (besides `strategy`, the other axis), different from its default."""

REFUSED = {"select": "select_key", "stop_at": "value"}
"""Settings that cannot be honoured alone: validation names the setting and the one that must come with it."""

IGNORED: dict[str, set[str]] = {
    "best_of_n": {"expand", "max_depth", "step_until", "c", "temperature"},
    "beam": {"c", "temperature"},
    "tot": {"c", "temperature"},
    "rebase": {"expand", "c"},
    "mcts": {"temperature"},
}
"""What each strategy does not read; besides these, `value_scale` without `value` and `select_key` with
select `value` are ignored under every strategy."""
ALWAYS_IGNORED_ALONE = {"value_scale", "select_key"}


def test_every_setting_is_classified() -> None:
    assert set(VALUES) == set(SearchSettings.model_fields) - {"strategy"}


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


async def _run(wf: dict[str, Any]) -> tuple[Any, EventLog]:
    events = EventLog()
    async with WorkflowRunner(spec_from_dict(wf), checkpointer="memory", context=RunHandles(events=events)) as r:
        result = await r.start({"task": "x"}, thread_id="t")
    return result, events


def _decisions(events: EventLog) -> list[str]:
    return [str(e.data["decision"]) for e in events.events if e.kind == "search.decision"]


@pytest.mark.parametrize("setting", sorted(VALUES))
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_setting_is_honoured_refused_or_said_to_be_ignored(strategy: str, setting: str) -> None:
    wf = _workflow({"strategy": strategy, setting: VALUES[setting]})
    problems = [str(p) for p in validate(spec_from_dict(wf))]
    if setting in REFUSED:
        assert len(problems) == 1 and f"search.{setting}" in problems[0] and REFUSED[setting] in problems[0]
        return
    assert problems == []
    result, events = await _run(wf)
    assert result.status == "done", result.errors
    said = [d for d in _decisions(events) if f"search.{setting}" in d]
    ignored = setting in IGNORED[strategy] or setting in ALWAYS_IGNORED_ALONE
    assert bool(said) == ignored, (said, _decisions(events))
    if ignored:
        assert said[0].endswith("ignored")
    if strategy in ("best_of_n", "mcts"):  # n branches / expansions, as asked
        assert len(result.state["report"]["branches"]) == (VALUES["n"] if setting == "n" else 4)


ONE_STEP = {"attempt": {"fn": "tests.graph.search_nodes:attempt", "next": "END"}}
"""A subgraph every branch finishes in one step: children of finished nodes cannot be made."""


@pytest.mark.parametrize("n", [1, 2, 3, 6, 9])
@pytest.mark.parametrize("expand", [1, 2, [2, 1]])
async def test_mcts_makes_n_expansions_when_the_tree_fills(n: int, expand: Any) -> None:
    search = {"strategy": "mcts", "n": n, "expand": expand, "value": "score", "value_scale": 10}
    result, events = await _run(_workflow(search, ONE_STEP))
    assert result.status == "done"
    assert len(result.state["report"]["branches"]) == n
    first = expand if isinstance(expand, int) else expand[0]
    widened = [d for d in _decisions(events) if "widening" in d]
    assert len(widened) == max(0, n - first)  # every expansion past the root's `expand` children says so


@pytest.mark.parametrize(("search", "needle"), [
    ({"stop_at": 1.0}, "search.stop_at 1 needs search.value"),
    ({"select": "smallest"}, "search.select smallest needs search.select_key"),
    ({"strategy": "beam", "expand": [2, 1, 1], "max_depth": 2}, "search.expand gives 3 depths but max_depth is 2"),
])
def test_settings_no_run_can_honour_fail_the_cli_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], search: dict[str, Any], needle: str
) -> None:
    import yaml

    path = tmp_path / "wf.yaml"
    path.write_text(yaml.safe_dump(_workflow(search)))
    assert run(["run", str(path), "-o", str(tmp_path / "runs"), "-i", '{"task": "x"}']) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_run_prints_the_decisions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    path = tmp_path / "wf.yaml"
    path.write_text(yaml.safe_dump(_workflow({"step_until": ["attempt"], "value": "score"}, ONE_STEP)))
    code = run(["run", str(path), "-o", str(tmp_path / "runs"), "-i", '{"task": "x"}',
                "-c", "nodes.go.strategy=mcts", "-c", "nodes.go.n=5", "-c", "nodes.go.temperature=0.9"])
    out = capsys.readouterr().err
    assert code == 0, out
    assert "go: decision: mcts does not use search.temperature (only rebase does): ignored" in out
    assert out.count("go: decision: mcts: no tree node can take another child") == 3
    assert out.count(": branch b") >= 5
