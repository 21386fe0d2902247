"""The published agent systems shipped as repair workflows (swe_search, agentless, codemonkeys): each validates
and draws, and a replayed-cassette run on an example task in the Docker sandbox shows its mechanism at work.
Scripted answers are served in order, so calls go one at a time (`concurrency=1`); `trace.content=true` puts
the prompts into the events, where the tests read what each call was shown."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agentflow.cli.main import run

from .conftest import CASSETTES, TASKS_FILE, read_jsonl, scripted_cassette

WORKFLOWS = ("swe_search", "agentless", "codemonkeys")
IID = "inikit__inikit-1"


@pytest.mark.parametrize("name", WORKFLOWS)
def test_each_published_workflow_validates_and_is_drawn(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["graph", "validate", f"workflows/{name}.yaml"]) == 0
    assert run(["graph", "show", name]) == 0
    shown = capsys.readouterr().out
    assert f"{name}: ok" in shown and "flowchart TD" in shown


def repair_run(tmp_path: Path, image: str, name: str, *extra: str) -> tuple[list[dict[str, Any]], dict[str, Any], Path]:
    out = tmp_path / "run"
    code = run(["repair", "--tasks", str(TASKS_FILE), "-i", IID, "--workflow", name,
                "--model", f"replay:{CASSETTES / 'workflows' / f'{name}_inikit-1.json'}",
                "--sandbox", "docker", "-c", f"sandbox.image={image}", "-c", "concurrency=1",
                "-c", "edit_format=search_replace", "-c", "trace.content=true", *extra, "-o", str(out)])
    assert code == 0
    outcome = json.loads((out / "instances" / IID / "outcome.json").read_text())
    return read_jsonl(out / "events.jsonl"), outcome, out


def prompts(events: list[dict[str, Any]]) -> list[str]:
    """The last user message of each model call, in order."""
    return [e["data"]["messages"][-1]["content"] for e in events if e["kind"] == "model.call"]


@pytest.mark.docker
def test_swe_search_value_agent_guides_the_tree_and_the_discriminator_picks(docker_image: str, tmp_path: Path) -> None:
    """c1 (a wrong fix) is valued 20 with an assessment; the next expansion from it reads that assessment and
    makes c2; c3 grows from c2. The tree's values are the value agent's, not the tests' (c1's tests score 0.5).
    c2 and c3 both pass the blind tests and the vote cannot split them (tests then smallest patch would take
    c2); the debate's judge picks finalist 2, c3, and c3's patch is what is submitted."""
    events, outcome, out = repair_run(tmp_path, docker_image, "swe_search", "-c", "nodes.search.n=1")
    shown = prompts(events)
    assert len(shown) == 11  # rank, reproduce, 3 x (edit, value), 2 debaters, judge
    edits = [shown[2], shown[4], shown[6]]
    assert "[ASSESSED-C1]" not in edits[0]
    assert "[ASSESSED-C1]" in edits[1] and "[ASSESSED-C2]" not in edits[1]  # expansion from c1 reads its assessment
    assert "[ASSESSED-C2]" in edits[2]
    values = {e["node_id"].rsplit("/", 1)[1]: e["data"]["value"] for e in events if e["kind"] == "repair.value"}
    assert values == {"c1": 0.2, "c2": 0.9, "c3": 0.6}
    tree = {e["data"]["candidate_id"].rsplit("/", 1)[1]: (e["data"]["value"], e.get("parent_id"))
            for e in events if e["kind"] == "search.node" and not e["data"].get("final") and e["data"]["depth"]}
    assert tree["c1"][0] == 0.2 and tree["c2"] == (0.9, f"{IID}/0.0") and tree["c3"] == (0.6, f"{IID}/0.0.0")
    attempts = {e["node_id"].rsplit("/", 1)[1]: e["data"] for e in events if e["kind"] == "repair.attempt"}
    assert attempts["c1"]["value"] == 0.5 and attempts["c2"]["passed"] is None and attempts["c3"]["passed"] is None
    debate = next(e["data"] for e in events if e["kind"] == "repair.discriminate")
    assert debate["finalists"] == [f"{IID}/c2", f"{IID}/c3", f"{IID}/c1"]  # by value
    assert "Best: 1" in shown[9] and "Best: 2" in shown[10]  # the 2nd debater and the judge read the arguments
    assert debate["chosen"] == outcome["chosen"] == f"{IID}/c3" and outcome["chosen_by"] == "discriminator"
    c3 = next(c for c in read_jsonl(out / "candidates.jsonl") if c["candidate_id"] == f"{IID}/c3")
    assert outcome["model_patch"] == c3["patch"] and "parts[-1].strip()" in c3["patch"]
    assert outcome["report"]["resolved"] is True


@pytest.mark.docker
def test_agentless_localizes_by_the_model_selects_regression_tests_and_votes(docker_image: str, tmp_path: Path) -> None:
    """Each localization step is shown only what the one before chose (files -> their outlines -> the chosen
    functions' code); the model's locations become the suspects; the regression test the model names is
    deselected from every verification; of the candidates that pass both the regression tests and the
    reproduction test, the majority's fix (c1 and c3, equal after normalisation) wins over the smaller c4."""
    events, outcome, out = repair_run(tmp_path, docker_image, "agentless")
    shown = prompts(events)
    assert len(shown) == 10  # 3 localization steps, reproduction, keep-working check, regression selection, 4 samples
    assert "inikit/values.py" in shown[0]  # the whole skeleton
    assert "def get(self, section, option" in shown[1] and "values.py" not in shown[1]  # the chosen files only
    assert "  34|         parts = stripped.split(\"=\")" in shown[2] and "def getint" not in shown[2]
    localized = next(e["data"] for e in events if e["kind"] == "repair.localize")
    assert localized["files"] == ["inikit/parser.py", "inikit/config.py"]
    assert localized["symbols"] == ["inikit/parser.py:loads", "inikit/config.py:Config.get"]
    assert localized["locations"] == ["inikit/parser.py:loads"]  # `line 34` is inside loads()
    assert outcome["ranked"] == ["inikit/parser.py:loads", "inikit/config.py:Config.get"]
    dropped = "tests/test_parser.py::test_line_without_equals_is_a_parse_error"
    assert "[9] " + dropped in shown[5]
    regression = next(e["data"] for e in events if e["kind"] == "repair.regression")
    assert regression["deselected"] == [dropped] and regression["passing"] == 13
    # verifications start pytest through the harness's runner script (`agentflow_pytest.py -q -p ...`)
    runs = [e["data"]["command"] for e in events
            if e["kind"] == "sandbox.exec" and ("pytest -q -p" in e["data"]["command"] or "pytest.py -q -p" in e["data"]["command"])]
    # the base (before and after the reproduction test) with every test, then again and each candidate without it
    # (a changed test command is a new verification, even of the same code)
    assert len(runs) == 7 and "--deselect" not in runs[0] + runs[1] and all(f"--deselect {dropped}" in r for r in runs[2:])
    cands = {c["candidate_id"].rsplit("/", 1)[1]: c for c in read_jsonl(out / "candidates.jsonl")}
    assert [(c["verification"]["reproduced"], c["verification"]["passed"]) for c in cands.values()] == [
        (False, None), (True, False), (False, None), (False, None)]
    # the keep-working check (values without `=` still read) is kept and every fix still passes it: it decides nothing
    keep = next(e["data"] for e in events if e["kind"] == "repair.keep_check")
    assert keep["kept"] and "host = local" in keep["check"]
    keeps = next(e["data"] for e in events if e["kind"] == "repair.keeps")
    assert (keeps["compared"], keeps["held"]) == (3, 3)
    assert outcome["chosen"] == f"{IID}/c1" and outcome["chosen_by"] == "vote"
    assert len(cands["c4"]["patch"]) < len(cands["c1"]["patch"])  # without the vote the smaller c4 would win
    assert outcome["report"]["resolved"] is True


@pytest.mark.docker
def test_codemonkeys_trajectories_write_tests_that_decide_the_vote(docker_image: str, tmp_path: Path) -> None:
    """Three trajectories each write a test script and an edit; between turns the script runs in the sandbox on
    the original code and on the change, and the next turn reads both results. t1's fix is wrong: all three
    generated tests fail on it (0 votes) although it passes the repository's tests like the others and comes
    first; t2 and t3 pass all three and tie, so the selection trajectory runs a script on finalist 2 (t3),
    reads its output, and picks it."""
    events, outcome, out = repair_run(tmp_path, docker_image, "codemonkeys", "-c", "nodes.trajectories.turns=2")
    calls = [e["data"]["messages"] for e in events if e["kind"] == "model.call"]
    assert len(calls) == 9  # rank, 3 trajectories x 2 turns, 2 selection turns
    second_turns = [calls[2][-1]["content"], calls[4][-1]["content"], calls[6][-1]["content"]]
    assert all("Your test script on the original code: failed (exit 1)" in t for t in second_turns)
    assert "with your change: failed (exit 1)" in second_turns[0] and "AssertionError: a\n" in second_turns[0]
    assert all("with your change: passed (exit 0)" in t for t in second_turns[1:])
    assert len(calls[2]) == 4  # system, first turn, its answer, the sandbox's results: one conversation
    cands = {c["candidate_id"].rsplit("/", 1)[1]: c for c in read_jsonl(out / "candidates.jsonl")}
    assert [c["verification"]["passed"] for c in cands.values()] == [None, None, None]  # the repo's tests cannot tell
    vote = next(e["data"] for e in events if e["kind"] == "repair.test_vote")
    assert vote["tests"] == 3 and vote["counted"] == [0, 1, 2]  # every generated test fails on the original code
    assert vote["votes"] == {f"{IID}/t1": 0, f"{IID}/t2": 3, f"{IID}/t3": 3}
    assert vote["finalists"] == [f"{IID}/t2", f"{IID}/t3"]
    selection = calls[8]
    assert "passes 3 of the generated tests" in selection[1]["content"]
    assert selection[-1]["content"] == "Output of your script on candidate 2 (exit 0)\n'x=y=z'"
    assert outcome["chosen"] == vote["chosen"] == f"{IID}/t3" and outcome["chosen_by"] == "selector"
    assert outcome["model_patch"] == cands["t3"]["patch"] and outcome["report"]["resolved"] is True


PARSER = Path("examples/swe-tasks/repos/inikit/inikit/parser.py").read_text().splitlines()
LOADS_BODY = textwrap.dedent("\n".join(PARSER[9:40]))  # the window the trajectory is shown: all of loads
SCRIPT = ('```python\nfrom inikit import loads\n\nurl = "postgresql://app@db/app?sslmode=require"\n'
          'cfg = loads("[db]\\nurl = " + url + "\\n")\nassert cfg.get("db", "url") == url, cfg.get("db", "url")\n```')


def rewrite_of_loads(maxsplit: int) -> str:
    return "```python\n" + LOADS_BODY.replace('split("=")', f'split("=", {maxsplit})') + "\n```"


@pytest.mark.docker
def test_codemonkeys_trajectory_in_rewrite_form(docker_image: str, tmp_path: Path) -> None:
    """With `edit_format: rewrite` (what `auto` gives a local model) a trajectory rewrites its suspect whole: the
    first answer's test script and rewrite are told apart by the rewrite's `def`, the script runs on both codes,
    and the second turn's rewrite replaces the first (it is read against the original code, not stacked)."""
    model = scripted_cassette(tmp_path / "cm.json", ["4, 1", SCRIPT + "\n\n" + rewrite_of_loads(2), rewrite_of_loads(1)])
    out = tmp_path / "run"
    code = run(["repair", "--tasks", str(TASKS_FILE), "-i", IID, "--workflow", "codemonkeys", "--model",
                f"replay:{model}", "--sandbox", "docker", "-c", f"sandbox.image={docker_image}", "-c", "concurrency=1",
                "-c", "edit_format=rewrite", "-c", "trace.content=true", "-c", "nodes.trajectories.trajectories=1",
                "-c", "nodes.trajectories.turns=2", "-c", "rank_keep=0", "-o", str(out)])
    assert code == 0
    events = read_jsonl(out / "events.jsonl")
    calls = [e["data"]["messages"] for e in events if e["kind"] == "model.call"]
    assert len(calls) == 3  # rank, two turns of the one trajectory
    first = calls[1][1]["content"]
    assert "This is `loads` from inikit/parser.py (lines 10-40)" in first and LOADS_BODY in first
    second = calls[2][-1]["content"]
    assert "Your edit was applied." in second
    assert "on the original code: failed (exit 1)" in second and "with your change: failed (exit 1)" in second
    assert '+        parts = stripped.split("=", 2)' in second
    assert "give `loads` again, complete and corrected" in second
    turns = [e["data"] for e in events if e["kind"] == "repair.trajectory_turn"]
    assert [t["edit"] for t in turns] == ["ok", "ok"] and all(t["script"] for t in turns)
    outcome = json.loads((out / "instances" / IID / "outcome.json").read_text())
    assert '+        parts = stripped.split("=", 1)' in outcome["model_patch"]
    assert 'split("=", 2)' not in outcome["model_patch"]  # replaced, not stacked on the first rewrite
    assert outcome["report"]["resolved"] is True
