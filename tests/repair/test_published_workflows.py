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
                "--sandbox", "docker", "-c", f"sandbox.image={image}", "-c", "search.concurrency=1",
                "-c", "edit.format=search_replace", "-c", "trace.content=true", *extra, "-o", str(out)])
    assert code == 0
    outcome = json.loads((out / "instances" / IID / "outcome.json").read_text())
    return read_jsonl(out / "events.jsonl"), outcome, out


def prompts(events: list[dict[str, Any]]) -> list[str]:
    """The last user message of each model call, in order."""
    return [e["data"]["messages"][-1]["content"] for e in events if e["kind"] == "model.call"]


def search_tree(events: list[dict[str, Any]]) -> dict[str, tuple[float, str | None]]:
    """Branch -> (its value, its parent) from the graph search's `search.node` events (the last one of each)."""
    return {e["node_id"].rsplit("/", 1)[1]: (e["data"]["value"], e["parent_id"].rsplit("/", 1)[-1])
            for e in events if e["kind"] == "search.node" and e["parent_id"]}


@pytest.mark.docker
def test_swe_search_value_agent_guides_the_tree_and_the_discriminator_picks(docker_image: str, tmp_path: Path) -> None:
    """b0.1 (a wrong fix) is valued 20 with an assessment; the next expansion, from b0, reads that assessment and
    makes b1.2; b2.3 grows from b1 and, the chain's last attempt, is valued too. The tree's values are the value
    agent's, not the tests' (b0.1's tests score 0.5). b1.2 and b2.3 both pass the blind tests and the vote cannot
    split them (tests then smallest patch would take b1.2); the debate's judge picks finalist 2, b2.3, and its
    patch is what is submitted. Three expansions, one child each (`expand=1`): a chain, as the answers follow."""
    events, outcome, out = repair_run(tmp_path, docker_image, "swe_search", "-c", "nodes.search.n=3",
                                      "-c", "nodes.search.expand=1")
    shown = prompts(events)
    assert len(shown) == 11  # rank, reproduce, 3 x (edit, value), 2 debaters, judge
    edits = [shown[2], shown[4], shown[6]]
    assert "[ASSESSED-C1]" not in edits[0]
    assert "[ASSESSED-C1]" in edits[1] and "[ASSESSED-C2]" not in edits[1]  # expansion from b0 reads its assessment
    assert "[ASSESSED-C2]" in edits[2]
    values = {e["node_id"].rsplit("/", 1)[1]: e["data"]["value"] for e in events if e["kind"] == "repair.value"}
    assert values == {"b0.1": 0.2, "b1.2": 0.9, "b2.3": 0.6}
    assert search_tree(events) == {"b0": (0.2, "search"), "b1": (0.9, "b0"), "b2": (0.6, "b1")}
    attempts = {e["node_id"].rsplit("/", 1)[1]: e["data"] for e in events if e["kind"] == "repair.attempt"}
    assert attempts["b0.1"]["value"] == 0.5 and attempts["b1.2"]["passed"] is None
    assert attempts["b2.3"]["passed"] is None
    debate = next(e["data"] for e in events if e["kind"] == "repair.discriminate")
    assert debate["finalists"] == [f"{IID}/b1.2", f"{IID}/b2.3", f"{IID}/b0.1"]  # by value
    assert "Best: 1" in shown[9] and "Best: 2" in shown[10]  # the 2nd debater and the judge read the arguments
    assert debate["chosen"] == outcome["chosen"] == f"{IID}/b2.3" and outcome["chosen_by"] == "discriminator"
    b23 = next(c for c in read_jsonl(out / "candidates.jsonl") if c["candidate_id"] == f"{IID}/b2.3")
    assert outcome["model_patch"] == b23["patch"] and "parts[-1].strip()" in b23["patch"]
    assert outcome["report"]["resolved"] is True


def cachette_run(tmp_path: Path, image: str, name: str, workflow: str, answers: list[str], *extra: str,
                 code: int = 0) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A published workflow on cachette-1, verified by the task's own tests (which fail at the base commit), with
    scripted answers; (its events, its outcome)."""
    cassette = scripted_cassette(tmp_path / f"{name}.json", answers)
    out = tmp_path / name
    assert run(["repair", "--tasks", str(TASKS_FILE), "-i", "cachette__cachette-1", "--workflow", workflow,
                "--model", f"replay:{cassette}", "--sandbox", "docker", "-c", f"sandbox.image={image}",
                "-c", "search.concurrency=1", "-c", "edit.format=search_replace", "-c", "tests.feedback=task", "-c", "mutants=false", "-c", "rank=false",
                *extra, "-o", str(out)]) == code
    outcome = json.loads((out / "instances" / "cachette__cachette-1" / "outcome.json").read_text())
    return read_jsonl(out / "events.jsonl"), outcome


@pytest.mark.docker
def test_swe_search_discriminator_never_submits_a_change_of_no_code_when_the_tests_fail_at_the_base(
        docker_image: str, tmp_path: Path) -> None:
    """cachette-1: the first branch rewords a docstring and the value agent values it above the second, the
    look-alike (neither passes the task's tests); the debate would take the docstring, finalist 1. The tests fail
    at the base commit, so a change of no code cannot be the fix: it is no finalist, and the look-alike is
    submitted without a debate. With only a docstring and a comment nothing is submitted."""
    from .test_repair_e2e import COMMENT, DOCSTRING, LOOKALIKE

    search = ("-c", "nodes.search.n=2")
    debate = ["Best: 1", "Best: 1", "Choice: 1"]
    events, outcome = cachette_run(tmp_path, docker_image, "mixed", "swe_search",
                                   [DOCSTRING, "Value: 90\nAssessment: a", LOOKALIKE, "Value: 20\nAssessment: b",
                                    *debate], *search)
    assert outcome["base_failed"] is True and outcome["status"] == "submitted"
    assert "move_to_end" in outcome["model_patch"] and "The keys, least" not in outcome["model_patch"]
    assert (outcome["chosen_by"], outcome["noop"]) == ("only", False)
    assert [(e["data"]["left_out"], e["data"]["among"]) for e in events if e["kind"] == "repair.noop"] == [(1, 2)]
    debate_run = next(e["data"] for e in events if e["kind"] == "repair.discriminate")
    assert debate_run["finalists"] == [outcome["chosen"]] and debate_run["arguments"] == []  # one: no debate
    assert sum(1 for e in events if e["kind"] == "model.call") == 4  # two edits, two values

    events, outcome = cachette_run(tmp_path, docker_image, "noops", "swe_search",
                                   [DOCSTRING, "Value: 90\nAssessment: a", COMMENT, "Value: 20\nAssessment: b",
                                    *debate], *search, code=1)
    assert (outcome["status"], outcome["chosen"], outcome["chosen_by"]) == ("no_patch", None, "noop")
    assert outcome["model_patch"] == "" and outcome["base_failed"] is True
    assert [e["data"]["left_out"] for e in events if e["kind"] == "repair.noop"] == [2]


WRONG_2 = ('inikit/parser.py\n<<<<<<< SEARCH\n        parts = stripped.split("=")\n=======\n'
           '        parts = stripped.split("=", 2)\n>>>>>>> REPLACE\nEND_EDITS')
WRONG_3 = WRONG_2.replace('split("=", 2)', 'split("=", 3)')


def fix_on(wrong: str) -> str:
    """An edit whose SEARCH lines exist only in the workspace of `wrong`: its split made right."""
    made = wrong.split("=======\n")[1].split("\n>>>>>>>")[0]
    right = made.replace(', 2)', ', 1)').replace(', 3)', ', 1)')
    return f"inikit/parser.py\n<<<<<<< SEARCH\n{made}\n=======\n{right}\n>>>>>>> REPLACE\nEND_EDITS"


@pytest.mark.docker
@pytest.mark.parametrize(("preferred", "values"), [("b0", (90, 20)), ("b1", (20, 90))])
def test_swe_search_uct_expands_the_branch_the_value_agent_prefers(
        docker_image: str, tmp_path: Path, preferred: str, values: tuple[int, int]) -> None:
    """The shipped tree (a node has up to two children): the first two expansions both start from the unchanged
    code and make wrong edits the tests score alike; the value agent values them differently, and the third
    expansion continues the one it values higher (from its checkpoint and workspace: the fix's SEARCH lines exist
    only there), whichever of the two that is. The fix passes the task's tests; the judge takes it."""
    wrong = {"b0": WRONG_2, "b1": WRONG_3}
    answers = ["4, 1", WRONG_2, f"Value: {values[0]}\nAssessment: b0", WRONG_3, f"Value: {values[1]}\nAssessment: b1",
               fix_on(wrong[preferred]), "Best: 1", "Best: 1", "Choice: 1"]
    cassette = scripted_cassette(tmp_path / "c.json", answers)
    out = tmp_path / "run"
    assert run(["repair", "--tasks", str(TASKS_FILE), "-i", IID, "--workflow", "swe_search", "--model",
                f"replay:{cassette}", "--sandbox", "docker", "-c", f"sandbox.image={docker_image}", "-c",
                "search.concurrency=1", "-c", "edit.format=search_replace", "-c", "tests.feedback=task", "-c", "mutants=false", "-c", "nodes.search.n=3",
                "-o", str(out)]) == 0
    events = read_jsonl(out / "events.jsonl")
    tree = search_tree(events)
    assert {b: parent for b, (_, parent) in tree.items()} == {"b0": "search", "b1": "search", "b2": preferred}
    assert (tree["b0"][0], tree["b1"][0]) == (values[0] / 100, values[1] / 100)
    tests = {e["node_id"].rsplit("/", 1)[1]: e["data"]["value"] for e in events if e["kind"] == "repair.attempt"}
    assert tests["b0.1"] == tests["b1.1"] < 1  # the tests cannot tell the two wrong edits apart
    outcome = json.loads((out / "instances" / IID / "outcome.json").read_text())
    assert outcome["chosen"] == f"{IID}/b2.2" and outcome["report"]["resolved"] is True
    assert sum(1 for e in events if e["kind"] == "model.call") == len(answers)


@pytest.mark.docker
def test_agentless_localizes_by_the_model_selects_regression_tests_and_votes(docker_image: str, tmp_path: Path) -> None:
    """Each localization step is shown only what the one before chose (files -> their outlines -> the chosen
    functions' code); the model's locations become the suspects; the regression test the model names is
    deselected from every verification; of the candidates that pass both the regression tests and the
    reproduction test, the majority's fix (b0.1 and b2.1, equal after normalisation) wins over the smaller b3.1.
    The four samples are the four branches of a graph search node, one attempt each (edit -> test)."""
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
    assert list(cands) == ["b0.1", "b1.1", "b2.1", "b3.1"]  # one sample per branch
    branches = {e["node_id"].rsplit("/", 1)[1] for e in events if e["kind"] == "search.node" and e["data"].get("final")
                and e["parent_id"]}
    assert branches == {"b0", "b1", "b2", "b3"}
    assert all([e["node_id"].rsplit("/", 1)[1] for e in events if e["kind"] == "node.start"
                and e["data"].get("branch") == b] == ["edit", "test"] for b in branches)  # no feedback loop
    assert outcome["chosen"] == f"{IID}/b0.1" and outcome["chosen_by"] == "vote"
    assert len(cands["b3.1"]["patch"]) < len(cands["b0.1"]["patch"])  # without the vote the smaller b3.1 would win
    assert outcome["report"]["resolved"] is True


@pytest.mark.docker
def test_codemonkeys_trajectories_write_tests_that_decide_the_vote(docker_image: str, tmp_path: Path) -> None:
    """Three trajectories each write a test script and an edit; between turns the script runs in the sandbox on
    the original code and on the change, and the next turn reads both results. t1's fix is wrong: all three
    generated tests fail on it (0 votes) although it passes the repository's tests like the others and comes
    first; t2 and t3 pass all three and tie, so the selection trajectory runs a script on finalist 2 (t3),
    reads its output, and picks it."""
    events, outcome, out = repair_run(tmp_path, docker_image, "codemonkeys", "-c", "nodes.trajectory.turns=2")
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


@pytest.mark.docker
def test_codemonkeys_vote_never_submits_a_change_of_no_code_when_the_tests_fail_at_the_base(
        docker_image: str, tmp_path: Path) -> None:
    """cachette-1: the first trajectory rewords a docstring, the second writes the look-alike; both pass the
    generated test, neither the task's tests, so the first candidate would stand. The tests fail at the base
    commit, so the docstring cannot be the fix: the look-alike is submitted."""
    from .test_repair_e2e import DOCSTRING, LOOKALIKE

    script = ("```python\nfrom cachette.lru import LRUCache\n\ncache = LRUCache(2)\ncache.set('a', 1)\n"
              "assert cache.get('a') == 1\n```\n\n")
    events, outcome = cachette_run(tmp_path, docker_image, "vote", "codemonkeys",
                                   [script + DOCSTRING, script + LOOKALIKE, "CHOICE: 1"],
                                   "-c", "nodes.trajectories.n=2", "-c", "nodes.trajectory.turns=1")
    assert outcome["base_failed"] is True and outcome["status"] == "submitted"
    assert "move_to_end" in outcome["model_patch"] and "The keys, least" not in outcome["model_patch"]
    assert outcome["noop"] is False
    assert [(e["data"]["left_out"], e["data"]["among"]) for e in events if e["kind"] == "repair.noop"] == [(1, 2)]


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
                f"replay:{model}", "--sandbox", "docker", "-c", f"sandbox.image={docker_image}", "-c", "search.concurrency=1",
                "-c", "edit.format=rewrite", "-c", "trace.content=true", "-c", "nodes.trajectories.n=1",
                "-c", "nodes.trajectory.turns=2", "-c", "rank_keep=0", "-o", str(out)])
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
