"""The benchmarks' journal (`--journal FILE`): finished rows survive a stop and are reused by a rerun with the
same settings only, and the result can say which commits its rows come from."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

# loaded from its file: putting benchmarks/ on sys.path would shadow names like `search` for every test
_SPEC = importlib.util.spec_from_file_location(
    "bench_journal", Path(__file__).resolve().parents[2] / "benchmarks" / "_journal.py")
assert _SPEC is not None and _SPEC.loader is not None
_MODULE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_MODULE)
Journal = _MODULE.Journal


def test_a_rerun_takes_up_the_finished_rows_of_the_same_settings(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    first = Journal(str(path), {"model": "m", "seed": 0})
    assert first.done("single", "HumanEval/1") is None
    first.add("single", "HumanEval/1", {"passed": True, "wall_s": 3.0})
    again = Journal(str(path), {"model": "m", "seed": 0})
    row = again.done("single", "HumanEval/1")
    assert row is not None and row["passed"] is True and row["commit"] == first.commit
    assert again.done("bon", "HumanEval/1") is None
    assert Journal(str(path), {"model": "m", "seed": 1}).done("single", "HumanEval/1") is None  # other settings
    again.add("bon", "HumanEval/1", {"passed": False, "wall_s": 5.0})
    assert [json.loads(line)["method"] for line in path.read_text().splitlines()] == ["single", "bon"]
    assert again.commits() == [first.commit]


def test_without_a_file_nothing_is_written(tmp_path: Path) -> None:
    journal = Journal(None, {"model": "m"})
    journal.add("single", "x", {"passed": True})
    assert journal.done("single", "x") is not None and list(tmp_path.iterdir()) == []


def test_settings_per_method_let_another_n_take_up_the_rows_it_does_not_change(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"

    def settings(n: int):  # N changes best-of-N's rows only
        return lambda method: {"model": "m"} | ({"n": n} if method == "bon" else {})

    first = Journal(str(path), settings(5))
    first.add("single", "HumanEval/1", {"passed": True})
    first.add("bon", "HumanEval/1", {"passed": False})
    assert json.loads(path.read_text().splitlines()[0])["settings"] == {"model": "m"}
    wider = Journal(str(path), settings(10))
    assert wider.done("single", "HumanEval/1") is not None
    assert wider.done("bon", "HumanEval/1") is None
    assert Journal(str(path), settings(5)).done("bon", "HumanEval/1") is not None
