from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentflow.errors import UserError
from agentflow.swe.tasks import load_predictions, load_tasks, select_tasks

from .conftest import TASKS_FILE, write_jsonl

TASK = {
    "instance_id": "demo__demo-1",
    "repo": "repos/demo",
    "base_commit": "0123456789abcdef",
    "problem_statement": "It breaks.",
    "FAIL_TO_PASS": '["tests/test_a.py::test_new"]',
    "PASS_TO_PASS": ["tests/test_a.py::test_old"],
}


def test_example_tasks_load_with_swe_bench_fields():
    tasks = load_tasks(TASKS_FILE)
    assert len(tasks) >= 12
    assert len({t.instance_id for t in tasks}) == len(tasks)
    for task in tasks:
        assert task.FAIL_TO_PASS and all("::" in t for t in task.FAIL_TO_PASS + task.PASS_TO_PASS)
        kind, where = task.repo_source()
        assert kind == "dir" and Path(where).is_dir()
        assert task.test_patch.startswith("diff --git")


def test_test_lists_may_be_json_strings_or_lists(tmp_path: Path):
    (task,) = load_tasks(write_jsonl(tmp_path / "t.jsonl", [TASK]))
    assert task.FAIL_TO_PASS == ["tests/test_a.py::test_new"]
    assert task.PASS_TO_PASS == ["tests/test_a.py::test_old"]


def test_relative_repo_resolves_against_the_tasks_file(tmp_path: Path):
    (tmp_path / "repos" / "demo").mkdir(parents=True)
    (task,) = load_tasks(write_jsonl(tmp_path / "t.jsonl", [TASK]))
    assert task.repo_source() == ("dir", str((tmp_path / "repos" / "demo").resolve()))


def test_git_urls_and_github_names(tmp_path: Path):
    records = [
        {**TASK, "instance_id": "a", "repo": "https://example.org/x/y.git"},
        {**TASK, "instance_id": "b", "repo": "astropy/astropy"},
    ]
    a, b = load_tasks(write_jsonl(tmp_path / "t.jsonl", records))
    assert a.repo_source() == ("git", "https://example.org/x/y.git")
    assert b.repo_source() == ("git", "https://github.com/astropy/astropy.git")


def test_json_list_file(tmp_path: Path):
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([TASK, {**TASK, "instance_id": "demo__demo-2"}]))
    assert [t.instance_id for t in load_tasks(path)] == ["demo__demo-1", "demo__demo-2"]


def test_missing_file_is_a_user_error(tmp_path: Path):
    with pytest.raises(UserError, match="not found"):
        load_tasks(tmp_path / "nope.jsonl")


def test_malformed_line_is_named_by_number(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(TASK) + "\n\n{not json\n")
    with pytest.raises(UserError, match=r"t\.jsonl:3: malformed task line"):
        load_tasks(path)


def test_task_without_required_field_is_named(tmp_path: Path):
    bad = {k: v for k, v in TASK.items() if k != "base_commit"}
    with pytest.raises(UserError, match=r":1: malformed task: field base_commit"):
        load_tasks(write_jsonl(tmp_path / "t.jsonl", [bad]))


def test_bad_test_list_is_named(tmp_path: Path):
    with pytest.raises(UserError, match="FAIL_TO_PASS"):
        load_tasks(write_jsonl(tmp_path / "t.jsonl", [{**TASK, "FAIL_TO_PASS": "[oops"}]))


def test_duplicate_ids_are_rejected(tmp_path: Path):
    with pytest.raises(UserError, match="appears twice"):
        load_tasks(write_jsonl(tmp_path / "t.jsonl", [TASK, TASK]))


def test_unknown_instance_id(tmp_path: Path):
    tasks = load_tasks(write_jsonl(tmp_path / "t.jsonl", [TASK]))
    assert select_tasks(tasks, ["demo__demo-1"])[0].instance_id == "demo__demo-1"
    with pytest.raises(UserError, match="unknown instance id 'nope'"):
        select_tasks(tasks, ["nope"])


def test_predictions_jsonl_and_swe_bench_dict_form(tmp_path: Path):
    pred = {"instance_id": "x", "model_name_or_path": "m", "model_patch": "diff"}
    (p,) = load_predictions(write_jsonl(tmp_path / "p.jsonl", [pred]))
    assert (p.instance_id, p.model_name_or_path, p.model_patch) == ("x", "m", "diff")
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"x": {"model_name_or_path": "m", "model_patch": None}}))
    (q,) = load_predictions(path)
    assert q.instance_id == "x" and q.model_patch is None


def test_malformed_prediction_line(tmp_path: Path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"instance_id": "x", "model_patch": ""}\n[1, 2]\n')
    with pytest.raises(UserError, match=r"p\.jsonl:2: malformed prediction: expected a JSON object"):
        load_predictions(path)
