"""`swe.mutants` (on by default) end to end in the Docker sandbox: single-site changes of the suspects are
verified before the search; a passing one is submitted without a model call, and when none passes the search
goes on as without them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentflow.cli.main import run

from .conftest import TASKS_FILE, read_jsonl, scripted_cassette, short

pytestmark = pytest.mark.docker


def repair(out: Path, image: str, instance_id: str, cassette: Path, *config: str) -> int:
    args = ["repair", "--tasks", str(TASKS_FILE), "-i", instance_id, "--model", f"replay:{cassette}",
            "--sandbox", "docker", "-c", f"sandbox.image={image}", "-o", str(out), "-c", "tests.feedback=task",
            "-c", "search.concurrency=1", "-c", "rank=false"]
    for item in config:
        args += ["-c", item]
    return run(args)


def test_a_one_token_fault_is_fixed_by_a_verified_change_without_a_model_call(docker_image: str, tmp_path: Path):
    """tabkit-2: `text[:width]` should be `text[: width - 1]` (a bound one off). The model is never asked (its
    cassette is empty: a call would fail the task)."""
    out = tmp_path / "run"
    assert repair(out, docker_image, "tabkit__tabkit-2", scripted_cassette(tmp_path / "c.json", [])) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["resolved_ids"] == ["tabkit__tabkit-2"]
    outcome = json.loads((out / "instances" / "tabkit__tabkit-2" / "outcome.json").read_text())
    assert outcome["samples"] == 0 and (short(outcome["chosen"]) or "").startswith("mutant.")
    cands = read_jsonl(out / "candidates.jsonl")
    assert [(c["mutant"], c["verification"]["passed"]) for c in cands] == [("shift-name", True)]
    assert "+    return text[:width - 1] + ELLIPSIS" in cands[0]["patch"]
    events = read_jsonl(out / "events.jsonl")
    tried = [e for e in events if e["kind"] == "repair.attempt" and short(e["node_id"]).startswith("mutant.")]
    assert tried and [e["data"]["passed"] for e in tried][-1] is True
    assert not [e for e in events if e["kind"] == "model.call"]
    [step] = [e["data"] for e in events if e["kind"] == "repair.mutants"]
    assert (step["stopped"], step["tried"], short(step["passed"])) == ("passed", len(tried), short(outcome["chosen"]))
    assert step["changes"] >= step["tried"] and step["functions"][0].startswith("tabkit/")


def test_a_passing_change_is_submitted_when_the_ranking_spent_the_budget(docker_image: str, tmp_path: Path):
    """tabkit-2 at one model call, the ranking's: the search can make no branch, and the change that passed
    before it is still the run's patch (the search passes the state on rather than failing). The run says its
    limit was reached (exit 1, as any run that used its budget)."""
    out = tmp_path / "run"
    cassette = scripted_cassette(tmp_path / "c.json", ["1"])
    assert repair(out, docker_image, "tabkit__tabkit-2", cassette, "rank=true", "limits.step_limit=1") == 1
    assert json.loads((out / "report.json").read_text())["resolved_ids"] == ["tabkit__tabkit-2"]
    outcome = json.loads((out / "instances" / "tabkit__tabkit-2" / "outcome.json").read_text())
    assert outcome["usage"]["model_calls"] == 1 and outcome["error"] is None
    assert (outcome["status"], outcome["limit"]) == ("limits_exceeded", "model_calls") and outcome["model_patch"]
    assert (short(outcome["chosen"]) or "").startswith("mutant.")


def test_when_no_change_passes_the_search_goes_on_and_submits_the_model_s_fix(docker_image: str, tmp_path: Path):
    """cachette-1: reading an entry must mark it used, a statement no single-site change adds. Every change
    is tried and fails; the model's edit (the one answer of the cassette) is then drawn and submitted."""
    fix = ("cachette/lru.py\n<<<<<<< SEARCH\n        self.stats.hits += 1\n        return value\n=======\n"
           "        self.stats.hits += 1\n        self._data.move_to_end(key)\n        return value\n"
           ">>>>>>> REPLACE\nEND_EDITS")
    out = tmp_path / "run"
    cassette = scripted_cassette(tmp_path / "c.json", [fix])
    assert repair(out, docker_image, "cachette__cachette-1", cassette, "edit.format=search_replace",
                  "search.when_tests_fail=null", "mutants_limit=6") == 0
    assert json.loads((out / "report.json").read_text())["resolved_ids"] == ["cachette__cachette-1"]
    events = read_jsonl(out / "events.jsonl")
    tried = [e for e in events if e["kind"] == "repair.attempt" and short(e["node_id"]).startswith("mutant.")]
    assert len(tried) == 6 and not any(e["data"]["passed"] for e in tried)
    [step] = [e["data"] for e in events if e["kind"] == "repair.mutants"]
    assert (step["stopped"], step["tried"], step["passed"]) == ("limit", 6, None) and step["changes"] > 6
    # the failing changes are reported, not candidates: only the model's sample is
    cands = read_jsonl(out / "candidates.jsonl")
    assert [(short(c["candidate_id"]), c["mutant"]) for c in cands] == [("b0.1", "")]


def test_with_mutants_off_the_model_edits_first(docker_image: str, tmp_path: Path):
    """tabkit-2 with `-c mutants=false`: no change is verified before the search; the model's edit (the one
    answer of the cassette) is the run's patch."""
    fix = ("tabkit/text.py\n<<<<<<< SEARCH\n    return text[:width] + ELLIPSIS\n=======\n"
           "    return text[: width - 1] + ELLIPSIS\n>>>>>>> REPLACE\nEND_EDITS")
    out = tmp_path / "run"
    cassette = scripted_cassette(tmp_path / "c.json", [fix])
    assert repair(out, docker_image, "tabkit__tabkit-2", cassette, "edit.format=search_replace",
                  "mutants=false") == 0
    assert json.loads((out / "report.json").read_text())["resolved_ids"] == ["tabkit__tabkit-2"]
    events = read_jsonl(out / "events.jsonl")
    assert not [e for e in events if e["kind"] == "repair.mutants"]
    assert not [e for e in events if e["kind"] == "repair.attempt" and short(e["node_id"]).startswith("mutant.")]
    cands = read_jsonl(out / "candidates.jsonl")
    assert [(short(c["candidate_id"]), c["mutant"]) for c in cands] == [("b0.1", "")]
