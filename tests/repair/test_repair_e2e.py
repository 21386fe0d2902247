"""`agentflow repair` end to end in the Docker sandbox with scripted (replayed) model answers. The attempts run
as graph nodes (edit -> test -> critique) in the branches of the workflow's search node, each branch in its
own fork of the task's workspace; candidate ids are `<task>/bK.n` (branch K's lineage's n-th sample)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from agentflow.cli.main import run
from agentflow.events import read_events
from agentflow.events.kinds import RepairStopped
from tests.swe_fixtures import resolve_bench

from .conftest import CASSETTES, ROOT, TASKS_FILE, branches, ran_in, read_jsonl, short

pytestmark = pytest.mark.docker


def repair(out: Path, image: str, *args: str) -> int:
    return run(["repair", *args, "--sandbox", "docker", "-c", f"sandbox.image={image}", "-o", str(out)])


def task_args(instance_id: str, cassette: str, *, oracle: bool = True) -> list[str]:
    """Scripted answers are replayed in order, so calls go one at a time (`concurrency=1`); `oracle` verifies
    candidates with the task's hidden tests (`feedback=task`) instead of blind mode."""
    args = ["--tasks", str(TASKS_FILE), "-i", instance_id, "--model", f"replay:{CASSETTES / cassette}"]
    args += ["-c", "search.concurrency=1", "-c", "edit.format=search_replace"]
    return args + (["-c", "tests.feedback=task", "-c", "mutants=false"] if oracle else [])


def test_single_resolves_and_writes_the_run_directory(docker_image: str, tmp_path: Path):
    out = tmp_path / "run"
    assert repair(out, docker_image, *task_args("inikit__inikit-1", "single_inikit-1.json")) == 0
    preds = read_jsonl(out / "preds.jsonl")
    assert len(preds) == 1 and set(preds[0]) == {"instance_id", "model_name_or_path", "model_patch"}
    patch = preds[0]["model_patch"]
    assert '+        parts = stripped.split("=", 1)' in patch
    assert (out / "instances" / "inikit__inikit-1" / "patch.diff").read_text() == patch
    report = json.loads((out / "report.json").read_text())
    assert report["resolved_ids"] == ["inikit__inikit-1"]
    inst = report["instances"]["inikit__inikit-1"]
    assert inst["status"] == "submitted" and inst["resolved"] is True
    assert inst["tests_status"]["FAIL_TO_PASS"] == {
        "success": ["tests/test_parser.py::test_value_may_contain_equals_signs"],
        "failure": [],
    }
    # the unchanged answer was drawn again, not counted; the wrong edit failed its tests; the next one passed
    cands = read_jsonl(out / "candidates.jsonl")
    assert [(short(c["candidate_id"]), short(c["parent_id"]), c["status"]) for c in cands] == [
        ("b0.1", "root", "noop"), ("b0.2", "root", "ok"), ("b0.3", "b0.2", "ok")]
    assert [c["verification"]["passed"] for c in cands[1:]] == [False, True]
    events = read_jsonl(out / "events.jsonl")
    attempts = [e for e in events if e["kind"] == "repair.attempt"]
    assert [(short(e["node_id"]), short(e["parent_id"])) for e in attempts] == [
        ("b0.2", "root"),
        ("b0.3", "b0.2"),  # the second attempt built on the first one's patch and test feedback
    ]
    assert [short(e["node_id"]) for e in events if e["kind"] == "repair.resample"] == ["b0.1"]
    # best-of-1: one branch, whose nodes ran as graph nodes (the critique node is a no-op: critique is off)
    assert branches(events) == {"b0": "search"}
    assert ran_in(events, "b0") == ["edit", "test", "critique", "edit", "test"]
    main = [short(e["node_id"]) for e in events if e["kind"] == "node.start" and "branch" not in e["data"]]
    assert main == ["baseline", "spectrum", "rank", "reproduce", "plan", "mutants", "search", "choose"]
    outcome = json.loads((out / "instances" / "inikit__inikit-1" / "outcome.json").read_text())
    assert outcome["chosen"] == "inikit__inikit-1/b0.3" and outcome["samples"] == 3 and outcome["suspects"]
    # the resolved config alone repeats the run: no strategy given, so each task's pre-flight chooses the search
    # again as it did (this task's tests pass at the base: the workflow's own)
    resolved = yaml.safe_load((out / "config.resolved.yaml").read_text())
    assert resolved["inputs"]["instance_ids"] == ["inikit__inikit-1"] and resolved["search"]["strategy"] is None
    assert resolved["search"]["when_tests_fail"] == "mcts" and "search" not in resolved["nodes"]
    assert not [e for e in events if e["kind"] == "repair.search"]
    # the backend actually used is recorded everywhere (never "auto")
    assert resolved["backend"] == "docker"
    assert json.loads((out / "instances" / "inikit__inikit-1" / "outcome.json").read_text())["sandbox_backend"] == "docker"
    assert [e["data"]["backend"] for e in events if e["kind"] == "sandbox.start"] == ["docker"]
    again = tmp_path / "again"
    assert run(["repair", "-c", str(out / "config.resolved.yaml"), "-o", str(again)]) == 0
    assert read_jsonl(again / "preds.jsonl")[0]["model_patch"] == patch


def test_best_of_n_resolves_and_strips_edits_to_tests(docker_image: str, tmp_path: Path):
    out = tmp_path / "run"
    args = task_args("inikit__inikit-1", "bon_inikit-1.json") + [
        "--strategy",
        "best_of_n",
        "-n",
        "3",
        "-c",
        "search.max_attempts=1",
    ]
    assert repair(out, docker_image, *args) == 0
    cands = read_jsonl(out / "candidates.jsonl")
    assert [c["status"] for c in cands] == ["ok", "unparsable", "ok"]
    assert [c["parent_id"].split("/")[1] for c in cands] == ["root", "root", "root"]  # independent rollouts
    chosen = cands[2]
    assert chosen["dropped_test_files"] == ["tests/test_parser.py"]
    assert "tests/" not in chosen["patch"] and "inikit/parser.py" in chosen["patch"]
    report = json.loads((out / "report.json").read_text())
    assert report["resolved_ids"] == ["inikit__inikit-1"]
    assert read_jsonl(out / "preds.jsonl")[0]["model_patch"] == chosen["patch"]


def test_mcts_resolves(docker_image: str, tmp_path: Path):
    out = tmp_path / "run"
    args = task_args("verspec__verspec-2", "mcts_verspec-2.json") + ["--strategy", "mcts", "-n", "2"]
    assert repair(out, docker_image, *args) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["resolved_ids"] == ["verspec__verspec-2"]
    events = read_jsonl(out / "events.jsonl")
    nodes = {e["node_id"]: e for e in events if e["kind"] == "search.node"}
    assert all(
        e["parent_id"] in nodes for e in nodes.values() if e["parent_id"]
    )  # one tree, every parent recorded
    assert sum(1 for e in nodes.values() if (e["data"]["action"] or "").startswith("edit → test")) >= 3
    assert any(e["data"]["depth"] == 2 for e in nodes.values())  # it searched below the first attempts
    # the fix came from a child branch that went on from its parent branch's candidate (and workspace)
    (fix,) = [c for c in read_jsonl(out / "candidates.jsonl") if c["status"] == "ok" and c["verification"]["passed"]]
    branch, parent = short(fix["candidate_id"]).split(".")[0], short(fix["parent_id"]).split(".")[0]
    assert branches(events)[branch] == parent != "root"


def test_plain_repository_with_test_command_and_apply(docker_image: str, tmp_path: Path):
    repo = tmp_path / "inikit"
    shutil.copytree(ROOT / "examples" / "swe-tasks" / "repos" / "inikit", repo)
    issue = tmp_path / "issue.md"
    issue.write_text("Values containing `=` are cut off after the second `=` by `loads`.\n")
    check = "python3 -c \"from inikit import loads; assert loads('[a]\\nk = x=y\\n').get('a', 'k') == 'x=y'\""
    args = [
        str(repo),
        "--issue-file",
        str(issue),
        "--test-cmd",
        check,
        "--apply",
        "--model",
        f"replay:{CASSETTES / 'bench' / 'inikit__inikit-1.json'}",
        "-c",
        "edit.format=search_replace",
        "-c",
        "search.concurrency=1",  # the check fails at the base: a tree search, one expansion at a time
        "-c",
        "mutants=false",
    ]
    assert repair(tmp_path / "run", docker_image, *args) == 0
    assert 'split("=", 1)' in (repo / "inikit" / "parser.py").read_text()
    (cand,) = read_jsonl(tmp_path / "run" / "candidates.jsonl")
    assert short(cand["candidate_id"]) == "b0.1" and cand["verification"]["kind"] == "test_cmd"
    assert cand["verification"]["passed"] is True
    events = read_jsonl(tmp_path / "run" / "events.jsonl")
    assert branches(events) == {"b0": "search"}
    assert ran_in(events, "b0") == ["edit", "test"]  # passed at once: no critique, no second attempt
    attempt = next(e for e in events if e["kind"] == "repair.attempt")
    assert (attempt["data"]["search"], attempt["data"]["branch"]) == ("search", "b0")


def test_step_limit_ends_the_search_and_the_best_patch_so_far_is_kept(docker_image: str, tmp_path: Path):
    out = tmp_path / "run"
    # 3 calls: the ranking of the suspects, an unchanged answer (resampled), the first (wrong) candidate
    assert (
        repair(out, docker_image, *task_args("inikit__inikit-1", "single_inikit-1.json"), "--step-limit", "3")
        == 1
    )
    report = json.loads((out / "report.json").read_text())
    inst = report["instances"]["inikit__inikit-1"]
    assert (inst["status"], inst["limit"]) == ("limits_exceeded", "model_calls")
    assert (report["statuses"], report["limits"]) == ({"limits_exceeded": 1}, {"model_calls": 1})
    assert inst["resolved"] is False and inst["tests_status"]["FAIL_TO_PASS"]["failure"]
    assert 'split("=", 2)' in read_jsonl(out / "preds.jsonl")[0]["model_patch"]
    # the branch's next edit was refused by the limit: the branch ended there, its candidate stands
    stopped = [e for e in read_events(out / "events.jsonl") if isinstance(e, RepairStopped)]
    assert stopped and stopped[0].limit == "model_calls"



def test_an_edit_naming_the_wrong_file_lands_where_its_search_lines_match(docker_image: str, tmp_path: Path):
    out = tmp_path / "run"
    assert repair(out, docker_image, *task_args("cachette__cachette-2", "wrong_path_cachette-2.json")) == 0
    cand = read_jsonl(out / "candidates.jsonl")[0]
    assert cand["status"] == "ok" and "cachette/stats.py" in cand["patch"] and "lru.py" not in cand["patch"]
    assert json.loads((out / "report.json").read_text())["resolved_ids"] == ["cachette__cachette-2"]


def test_blind_mode_reproduces_the_issue_and_the_vote_picks_the_patch(docker_image: str, tmp_path: Path):
    """The default (blind) mode never runs the hidden tests during the search: a reproduction script written by
    the model is kept because it fails at the base commit; candidates are scored by the repository's tests plus
    that script; the tie between two passing fixes goes to the one more samples agree on; only the final report
    uses the task's tests."""
    out = tmp_path / "run"
    args = task_args("inikit__inikit-1", "blind_inikit-1.json", oracle=False)
    assert repair(out, docker_image, *args, "--strategy", "best_of_n", "-n", "4", "-c", "search.max_attempts=1",
                  "-c", "keep_check=false", "-c", "mutants=false") == 0  # recorded before the keep-working check
    events = read_jsonl(out / "events.jsonl")
    repro = next(e for e in events if e["kind"] == "repair.reproduce")
    assert repro["data"]["kept"] is True and "AssertionError" in repro["data"]["output"]
    cands = read_jsonl(out / "candidates.jsonl")
    assert [(short(c["candidate_id"]), c["status"]) for c in cands] == [(f"b{k}.1", "ok") for k in range(4)]
    # four branches of one attempt each, each in its own fork of the workspace holding the reproduction script
    assert branches(events) == {f"b{k}": "search" for k in range(4)}
    assert all(ran_in(events, f"b{k}") == ["edit", "test"] for k in range(4))
    verdicts = [(c["verification"]["kind"], c["verification"]["reproduced"], c["verification"]["passed"]) for c in cands]
    # blind verification cannot decide: a candidate that fixes the reproduction is "not refuted" (None)
    assert verdicts == [("test_cmd", False, None), ("test_cmd", True, False), ("test_cmd", False, None),
                        ("test_cmd", False, None)]
    # the suite runs once per distinct patch, not once per sample: samples that agree share a verification
    # the suite's verifications start pytest through the harness's runner script (`agentflow_pytest.py -q ...`)
    runs = [e["data"]["command"] for e in events if e["kind"] == "sandbox.exec"
            and any(f"{runner} -q -p no:cacheprovider" in e["data"]["command"] for runner in ("-m pytest", "pytest.py"))]
    suite = [c for c in runs if "agentflow_spectrum" not in c]
    distinct = {c["patch"].strip() for c in cands}
    # the base: the pre-flight (before any model call; the first base verification takes its run), then
    # again after the script; each distinct patch runs the tests that reach what it changes; the finalist
    # runs the whole suite before it is chosen
    targeted = [c for c in suite if "::" in c]
    assert len(distinct) < len(cands) and len(suite) == 2 + len(distinct) + 1 and len(targeted) == len(distinct)
    assert len(runs) - len(suite) == 1  # and once more, call-traced, for the spectrum (swe.spectrum)
    outcome = json.loads((out / "instances" / "inikit__inikit-1" / "outcome.json").read_text())
    assert outcome["feedback"] == "repo" and outcome["reproduced"] is True
    # the scripted ranking named the 4th and 1st of the heuristic's pool: loads() and get()
    assert outcome["ranked"] == ["inikit/parser.py:loads", "inikit/config.py:Config.get"]
    assert next(e for e in events if e["kind"] == "repair.rank")["data"]["ranked"] == outcome["ranked"]
    # the vote counts the samples of every branch (gathered): two agree on the fix
    assert outcome["chosen"] == "inikit__inikit-1/b0.1" and outcome["chosen_by"] == "vote"
    assert outcome["report"]["resolved"] is True  # the hidden tests, run once, for the report


def test_a_tool_calling_model_edits_with_the_editor_tools(docker_image: str, tmp_path: Path):
    out = tmp_path / "run"
    args = task_args("inikit__inikit-1", "tools_inikit-1.json")
    assert repair(out, docker_image, *args, "-c", "edit.format=tools") == 0
    patch = read_jsonl(out / "preds.jsonl")[0]["model_patch"]
    assert '+        parts = stripped.split("=", 1)' in patch
    assert json.loads((out / "report.json").read_text())["resolved_ids"] == ["inikit__inikit-1"]
    cands = read_jsonl(out / "candidates.jsonl")
    assert [c["status"] for c in cands] == ["ok"]
    assert cands[0]["answer"] == "Option values are now split on the first '=' only."
    events = read_jsonl(out / "events.jsonl")
    edit = next(e for e in events if e["kind"] == "repair.tool_edit")
    assert edit["data"]["files"] == ["inikit/parser.py"] and edit["data"]["steps"] == 4
    calls = [e["data"] for e in events if e["kind"] == "tool.call"]
    assert [c["name"] for c in calls] == ["view", "str_replace", "str_replace"]
    # the first replacement did not match: the model read why, and the run went on
    assert calls[1]["ok"] is False and "was not found" in calls[1]["error"] and calls[2]["ok"] is True
    assert short(cands[0]["candidate_id"]) == "b0.1" and ran_in(events, "b0") == ["edit", "test"]
    # the edit's four model calls and three tool calls all count in the task's usage (with the ranking's call)
    usage = json.loads((out / "instances" / "inikit__inikit-1" / "outcome.json").read_text())["usage"]
    assert usage["model_calls"] == 5 and usage["tool_calls"] == 3


def test_a_fix_beside_a_slip_is_found_by_verifying_each_change_alone(docker_image: str, tmp_path: Path):
    """One answer fixes the bug and, a few lines above, breaks section names: the edit fails its tests, so
    each change is verified alone (no model call); the part with the fix passes and is submitted. Parts are
    candidates, not samples, and do not vote."""
    from .conftest import scripted_cassette

    answer = (
        "inikit/parser.py\n<<<<<<< SEARCH\n            current = normalize_name(stripped[1:-1])\n=======\n"
        "            current = normalize_name(stripped[1:])\n>>>>>>> REPLACE\n"
        "inikit/parser.py\n<<<<<<< SEARCH\n        parts = stripped.split(\"=\")\n=======\n"
        "        parts = stripped.split(\"=\", 1)\n>>>>>>> REPLACE\nEND_EDITS"
    )
    cassette = scripted_cassette(tmp_path / "c.json", ["1", answer])  # rank, edit
    out = tmp_path / "run"
    args = ["--tasks", str(TASKS_FILE), "-i", "inikit__inikit-1", "--model", f"replay:{cassette}",
            "-c", "search.concurrency=1", "-c", "edit.format=search_replace", "-c", "tests.feedback=task", "-c", "mutants=false", "-c", "search.max_attempts=1"]
    assert repair(out, docker_image, *args) == 0
    cands = read_jsonl(out / "candidates.jsonl")
    assert [(short(c["candidate_id"]), c["part_of"], c["verification"]["passed"]) for c in cands] == [
        ("b0.1", None, False),
        ("b0.1.1", "inikit__inikit-1/b0.1", False),  # the slip alone
        ("b0.1.2", "inikit__inikit-1/b0.1", True),   # the fix alone
    ]
    assert '+        parts = stripped.split("=", 1)' in cands[2]["patch"] and "stripped[1:])" not in cands[2]["patch"]
    outcome = json.loads((out / "instances" / "inikit__inikit-1" / "outcome.json").read_text())
    assert outcome["chosen"] == "inikit__inikit-1/b0.1.2" and outcome["samples"] == 1
    assert json.loads((out / "report.json").read_text())["resolved_ids"] == ["inikit__inikit-1"]
    # without splitting, the one answer is all there is
    again = tmp_path / "again"
    assert repair(again, docker_image, *args, "-c", "split_edits=false") == 0
    assert [short(c["candidate_id"]) for c in read_jsonl(again / "candidates.jsonl")] == ["b0.1"]
    assert json.loads((again / "report.json").read_text())["resolved_ids"] == []


LOOKALIKE = ("cachette/lru.py\n<<<<<<< SEARCH\n        return key in self._data\n=======\n"
             "        if key in self._data:\n            self._data.move_to_end(key)\n            return True\n"
             "        return False\n>>>>>>> REPLACE\nEND_EDITS")
"""cachette-1: the embedded model's look-alike, `__contains__` moves the key (the report's block still shows False)."""
FIX = ("cachette/lru.py\n<<<<<<< SEARCH\n        self.stats.hits += 1\n        return value\n=======\n"
       "        self.stats.hits += 1\n        self._data.move_to_end(key)\n        return value\n"
       ">>>>>>> REPLACE\nEND_EDITS")
"""cachette-1's fix: reading an entry marks it used."""


def test_blind_the_examples_choose_the_fix_that_three_lookalike_samples_outvote(docker_image: str, tmp_path: Path):
    """cachette-1, blind (the repository's tests pass for every candidate, no reproduction script): three samples
    make `__contains__` move the key (what the embedded model wrote), one marks the entry used in `get`. The
    vote alone picks the look-alike; the report's own block (`"alice" in cache`, False) shows True only with the
    fix, so the examples choose it, and it resolves the task."""
    from .conftest import scripted_cassette

    cassette = scripted_cassette(tmp_path / "c.json", [LOOKALIKE, FIX, LOOKALIKE, LOOKALIKE])
    args = ["--tasks", str(TASKS_FILE), "-i", "cachette__cachette-1", "--model", f"replay:{cassette}",
            "--strategy", "best_of_n", "-n", "4", "-c", "search.concurrency=1", "-c", "edit.format=search_replace",
            "-c", "search.max_attempts=1", "-c", "rank=false", "-c", "spectrum=false", "-c", "reproduce=false"]
    out = tmp_path / "run"
    assert repair(out, docker_image, *args) == 0
    outcome = json.loads((out / "instances" / "cachette__cachette-1" / "outcome.json").read_text())
    assert outcome["chosen_by"] == "examples"
    assert "+        self._data.move_to_end(key)\n         return value" in (out / "instances" / "cachette__cachette-1"
                                                                              / "patch.diff").read_text()
    assert json.loads((out / "report.json").read_text())["resolved_ids"] == ["cachette__cachette-1"]
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    compared = next(e["data"] for e in events if e["kind"] == "repair.examples")
    assert (compared["compared"], compared["changed"], compared["usable"]) == (2, 1, True)
    # without the comparison the vote picks the look-alike, which does not resolve
    again = tmp_path / "again"
    assert repair(again, docker_image, *args, "-c", "compare_examples=false") == 0
    assert json.loads((again / "instances" / "cachette__cachette-1" / "outcome.json").read_text())["chosen_by"] == "vote"
    assert json.loads((again / "report.json").read_text())["resolved_ids"] == []


def test_blind_a_reproduction_of_another_case_is_refused_and_the_issues_own_case_finds_the_function(
        docker_image: str, tmp_path: Path):
    """inikit-2, blind: the first script copies a repository test's fixture (`getint` on "8") and asserts a
    wrong value, failing at the base commit for a reason the issue is not about: refused (it uses none of the
    issue's values), with the reason in the next prompt. The
    second runs the issue's own case (`debug = maybe`): kept, its traceback puts `to_bool` among the first
    suspects, and the sample that fixes it there resolves the task."""
    from .conftest import scripted_cassette

    other_case = ('```python\nfrom inikit import Config\n\ncfg = Config({"s": {"n": "8"}})\n'
                  'assert cfg.getint("s", "n") == 9\n```')
    own_case = ('```python\nfrom inikit import Config, ConversionError\n\ncfg = Config({"server": {"debug": "maybe"}})\n'
                'try:\n    cfg.getbool("server", "debug")\nexcept ConversionError:\n    pass\n```')
    fix = ("inikit/values.py\n<<<<<<< SEARCH\n    return _BOOLEANS[raw.strip().lower()]\n=======\n"
           "    try:\n        return _BOOLEANS[raw.strip().lower()]\n    except KeyError:\n"
           "        raise ConversionError(f\"not a boolean: {raw!r}\") from None\n>>>>>>> REPLACE\nEND_EDITS")
    cassette = scripted_cassette(tmp_path / "c.json", [other_case, own_case, fix])
    args = [*task_args("inikit__inikit-2", str(cassette), oracle=False),  # an absolute cassette path stays as it is
            "-c", "search.max_attempts=1", "-c", "rank=false", "-c", "spectrum=false", "-c", "keep_check=false"]
    out = tmp_path / "run"
    assert repair(out, docker_image, *args) == 0
    events = read_jsonl(out / "events.jsonl")
    tries = [e["data"] for e in events if e["kind"] == "repair.reproduce"]
    assert [t["kept"] for t in tries] == [False, True]
    assert "uses none of the values the issue shows" in tries[0]["output"] and "'maybe'" in tries[0]["output"]
    base = next(e["data"] for e in events if e["kind"] == "repair.base")
    # its traceback reaches to_bool, which the other case's (to_int) left out of the suspects
    assert base["reproduced"] is True and "inikit/values.py:to_bool" in base["suspects"][:2]
    assert json.loads((out / "report.json").read_text())["resolved_ids"] == ["inikit__inikit-2"]


def test_blind_the_keep_working_check_outweighs_the_vote_of_samples_that_break_hex(docker_image: str, tmp_path: Path):
    """inikit-3, blind, best-of-4: the reproduction (`getint` of "03") is kept; the keep-working check the model
    writes asserts "03" too and hex (`0x1F`) beside it, and is cut down to hex. Three samples parse decimals
    only (`int(raw, 10)`, the embedded model's most frequent answer): they pass the repository's tests and the
    reproduction like the fix, and outvote it; the check still passes only on the fix, which is submitted and
    resolves. Without the check the vote submits a decimal-only rewrite, which the hidden tests reject."""
    from .conftest import scripted_cassette

    repro = ('```python\nfrom inikit import loads\n\ncfg = loads("[job]\\nretries = 03\\n")\n'
             'assert cfg.getint("job", "retries") == 3\n```')
    keep = ('```python\nfrom inikit import loads\n\ncfg = loads("[job]\\nretries = 03\\nmask = 0x1F\\n")\n'
            'assert cfg.getint("job", "retries") == 3\nassert cfg.getint("job", "mask") == 31\n```')
    decimal = ("inikit/values.py\n<<<<<<< SEARCH\n        return int(raw.strip(), 0)\n=======\n"
               "        return int(raw.strip(), 10)\n>>>>>>> REPLACE\nEND_EDITS")
    fix = ("inikit/values.py\n<<<<<<< SEARCH\n        return int(raw.strip(), 0)\n=======\n"
           "        try:\n            return int(raw.strip(), 0)\n        except ValueError:\n"
           "            return int(raw.strip(), 10)\n>>>>>>> REPLACE\nEND_EDITS")
    args = ["--tasks", str(TASKS_FILE), "-i", "inikit__inikit-3", "--strategy", "best_of_n", "-n", "4",
            "-c", "search.concurrency=1", "-c", "edit.format=search_replace", "-c", "search.max_attempts=1", "-c", "rank=false",
            "-c", "spectrum=false"]
    cassette = scripted_cassette(tmp_path / "c.json", [repro, keep, decimal, decimal, decimal, fix])
    out = tmp_path / "run"
    assert repair(out, docker_image, *args, "--model", f"replay:{cassette}") == 0
    events = read_jsonl(out / "events.jsonl")
    check = next(e["data"] for e in events if e["kind"] == "repair.keep_check")
    assert check["kept"] and "0x1F" in check["check"] and "'retries') == 3" not in check["check"]
    keeps = next(e["data"] for e in events if e["kind"] == "repair.keeps")
    assert (keeps["compared"], keeps["held"]) == (2, 1)
    outcome = json.loads((out / "instances" / "inikit__inikit-3" / "outcome.json").read_text())
    assert outcome["chosen"] == "inikit__inikit-3/b3.1" and outcome["chosen_by"] == "keep_check"
    assert json.loads((out / "report.json").read_text())["resolved_ids"] == ["inikit__inikit-3"]
    # without the check: the same samples, and the vote submits the decimal-only rewrite
    cassette = scripted_cassette(tmp_path / "c2.json", [repro, decimal, decimal, decimal, fix])
    again = tmp_path / "again"
    assert repair(again, docker_image, *args, "--model", f"replay:{cassette}", "-c", "keep_check=false") == 0
    outcome = json.loads((again / "instances" / "inikit__inikit-3" / "outcome.json").read_text())
    assert outcome["chosen"] == "inikit__inikit-3/b0.1" and outcome["chosen_by"] == "vote"
    assert json.loads((again / "report.json").read_text())["resolved_ids"] == []


DOCSTRING = ('cachette/lru.py\n<<<<<<< SEARCH\n        """Keys from least to most recently used."""\n=======\n'
             '        """The keys, least recently used first."""\n>>>>>>> REPLACE\nEND_EDITS')
"""cachette-1: a sample that only rewords a docstring (it changes no code)."""
COMMENT = ("cachette/lru.py\n<<<<<<< SEARCH\n        self.stats.hits += 1\n        return value\n=======\n"
           "        self.stats.hits += 1  # counted before the value is returned\n        return value\n"
           ">>>>>>> REPLACE\nEND_EDITS")
"""cachette-1: a sample that only adds a comment."""


def test_a_patch_that_changes_no_code_is_not_submitted_when_the_tests_fail_at_the_base(
        docker_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """cachette-1 verified by its own tests, which fail at the base commit: two samples reword a docstring, one
    adds a comment, one writes the look-alike; no candidate passes, and the vote would submit the docstring. It
    changes no code, so it cannot be the fix: the look-alike is submitted. With only the docstring and the
    comment nothing is submitted, and the outcome says why. In blind mode without a reproduction the tests pass
    at the base commit: the docstring is submitted as before, flagged as changing no code."""
    from .conftest import scripted_cassette

    def run_with(name: str, answers: list[str], *extra: str, code: int = 0) -> dict:
        cassette = scripted_cassette(tmp_path / f"{name}.json", answers)
        args = ["--tasks", str(TASKS_FILE), "-i", "cachette__cachette-1", "--model", f"replay:{cassette}",
                "--strategy", "best_of_n", "-n", str(len(answers)), "-c", "search.concurrency=1",
                "-c", "edit.format=search_replace", "-c", "search.max_attempts=1", "-c", "rank=false",
                "-c", "spectrum=false", "-c", "reproduce=false", *extra]
        assert repair(tmp_path / name, docker_image, *args) == code
        return json.loads((tmp_path / name / "instances" / "cachette__cachette-1" / "outcome.json").read_text())

    outcome = run_with("mixed", [DOCSTRING, LOOKALIKE, COMMENT, DOCSTRING], "-c", "tests.feedback=task", "-c", "mutants=false")
    assert outcome["base_failed"] is True and outcome["chosen_by"] == "only" and outcome["noop"] is False
    assert "move_to_end" in outcome["model_patch"] and outcome["candidates"] == 4
    events = read_jsonl(tmp_path / "mixed" / "events.jsonl")
    assert [e["data"]["left_out"] for e in events if e["kind"] == "repair.noop"] == [3]

    outcome = run_with("noops", [DOCSTRING, COMMENT], "-c", "tests.feedback=task", "-c", "mutants=false", code=1)  # no patch: exit 1
    assert (outcome["status"], outcome["chosen"], outcome["chosen_by"]) == ("no_patch", None, "noop")
    assert outcome["model_patch"] == "" and outcome["base_failed"] is True
    assert json.loads((tmp_path / "noops" / "report.json").read_text())["statuses"] == {"no_patch": 1}
    assert "nothing submitted: every candidate changes only docstrings" in capsys.readouterr().out

    outcome = run_with("blind", [DOCSTRING, DOCSTRING, LOOKALIKE])
    assert outcome["base_failed"] is False and outcome["status"] == "submitted"
    assert (outcome["chosen_by"], outcome["noop"]) == ("vote", True) and "The keys, least" in outcome["model_patch"]

    # the benchmark counts a submitted noop only where the tests failed at the base commit
    bench = resolve_bench()
    outcomes = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("*/instances/*/outcome.json"))]
    assert len(outcomes) == 3 and bench.noop_submissions(outcomes) == 0
    assert bench.noop_submissions([o | {"base_failed": True} for o in outcomes]) == 1  # the blind run's, were it so
    assert bench.figures(tmp_path / "noops", 1.0)["chosen_by"] == {"noop": 1}


def test_blind_the_reproduction_is_the_issue_s_own_examples_with_the_values_the_model_says_they_should_give(
        docker_image: str, tmp_path: Path):
    """verspec-3, blind: the issue shows two `contains` calls giving True and says both should be False. The
    model is asked only what each example should give; the script is the issue's own statements (the name they
    never import imported from its module) with those values asserted: it fails at the base commit, so it is
    kept, and the fix is the candidate that passes it."""
    from .conftest import scripted_cassette

    fix = ("verspec/version.py\n<<<<<<< SEARCH\n            return Version(self.major, self.minor + 1, self.patch)\n"
           "=======\n            return Version(self.major, self.minor + 1, 0)\n>>>>>>> REPLACE\nEND_EDITS")
    wrong = ("verspec/version.py\n<<<<<<< SEARCH\n            return Version(self.major, self.minor, self.patch + 1)\n"
             "=======\n            return Version(self.major, self.minor, self.patch + 2)\n>>>>>>> REPLACE\nEND_EDITS")
    cassette = scripted_cassette(tmp_path / "c.json", [
        '```python\n>>> Specifier("~1.2.3").contains("1.3.1")\nFalse\n>>> Specifier("^0.2.3").contains("0.3.0")\nFalse\n```',
        wrong, fix])
    args = [*task_args("verspec__verspec-3", str(cassette), oracle=False),
            "-c", "search.max_attempts=2", "-c", "rank=false", "-c", "keep_check=false", "-c", "trace.content=true"]
    out = tmp_path / "run"
    assert repair(out, docker_image, *args) == 0
    events = read_jsonl(out / "events.jsonl")
    tries = [e["data"] for e in events if e["kind"] == "repair.reproduce"]
    assert [(t["kept"], t["source"]) for t in tries] == [(True, "examples")]
    script = tries[0]["script"]
    assert "import Specifier" in script and 'Specifier("~1.2.3").contains("1.3.1")' in script
    assert "the issue expects False" in tries[0]["output"]
    cands = read_jsonl(out / "candidates.jsonl")
    # the wrong edit still fails the examples' check, and the next attempt is told what they give
    assert [c["verification"]["reproduced"] for c in cands] == [True, False]
    prompts = [e["data"]["messages"][-1]["content"] for e in events if e["kind"] == "model.call"
               and "SEARCH" in e["data"]["messages"][-1]["content"]]
    assert 'contains("1.3.1")' in prompts[-1] and "the issue expects False" in prompts[-1]
    outcome = json.loads((out / "instances" / "verspec__verspec-3" / "outcome.json").read_text())
    assert outcome["reproduced"] is True and outcome["report"]["resolved"] is True
