"""A misspelt name gets the nearest right one in its error, wherever a user types one: a search setting, a
`fn:` function (read statically by `graph validate`, imported by `run`), and `run --fork T --after NODE`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from agentflow.graph.search.settings import parse_search_settings

from agentflow.cli.main import run
from agentflow.errors import ConfigError, UserError
from agentflow.graph.define.loader import resolve_callable


@pytest.mark.parametrize("typo, right", [("strategyy", "strategy"), ("temprature", "temperature"),
                                         ("stop_att", "stop_at"), ("concurency", "concurrency")])
def test_a_misspelt_search_setting(typo: str, right: str) -> None:
    with pytest.raises(ConfigError, match=f"did you mean '{right}'"):
        parse_search_settings({typo: 1}, "go")


HELPERS = "def reply(request):\n    return 'x'\n\n\ndef summarize(state):\n    return {}\n"


@pytest.mark.parametrize("ref, right", [("tests.cli.nodes:napp", "nap"), ("tests.cli.nodes:Ask", "ask"),
                                        ("helpers.py:sumarize", "summarize"), ("helpers.py:replay", "reply")])
def test_a_misspelt_fn_name(ref: str, right: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "helpers.py").write_text(HELPERS)
    workflow = tmp_path / "w.yaml"
    workflow.write_text(yaml.safe_dump({"name": "w", "nodes": {"a": {"fn": ref, "next": "END"}}}))
    assert run(["graph", "validate", str(workflow)]) != 0  # read, not imported
    said = capsys.readouterr()
    assert f"did you mean '{right}'" in said.out + said.err, said
    module, _, name = ref.partition(":")
    imported = f"{tmp_path / module}:{name}" if module.endswith(".py") else ref
    with pytest.raises(UserError, match=f"did you mean '{right}'"):  # imported, as `run` does
        resolve_callable(imported, "node 'a'")


def test_a_misspelt_after_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workflow = tmp_path / "naps.yaml"
    workflow.write_text(yaml.safe_dump({
        "name": "naps", "state": {"nap": {"type": "float"}, "naps": {"type": "int"}},
        "nodes": {"first": {"fn": "tests.cli.nodes:nap", "next": "second"},
                  "second": {"fn": "tests.cli.nodes:nap", "next": "END"}}}))
    runs = str(tmp_path / "runs")
    assert run(["run", str(workflow), "-o", runs, "--json", "-i", '{"nap": 0}']) == 0
    thread = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["thread_id"]
    assert run(["run", "-o", runs, "--fork", thread, "--after", "frist"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'first'" in err, err
    assert len(list(Path(runs).iterdir())) == 1  # no run folder for the refused fork
