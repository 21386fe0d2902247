"""Item 5: every path built from an id stays inside the output folder and is unique."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentflow.cli.main import run
from agentflow.errors import UserError
from agentflow.paths import path_component

from .conftest import TASKS_FILE, read_jsonl, write_jsonl

TRICKY = ["x/1", "x_1", "..", ".", "/etc/passwd", "../../escape", "a%2Fb", "a/b", ".hidden", "ü-1"]


def test_path_component_is_injective_and_never_leaves_its_folder(tmp_path: Path) -> None:
    names = [path_component(i) for i in TRICKY]
    assert len(set(names)) == len(TRICKY)
    for name in names:
        assert "/" not in name and name not in (".", "..") and not name.startswith(".")
        assert (tmp_path / name).resolve().parent == tmp_path.resolve()
    assert path_component("astropy__astropy-12907") == "astropy__astropy-12907"


def test_unusable_ids_are_one_line_errors() -> None:
    with pytest.raises(UserError, match="empty"):
        path_component("")
    with pytest.raises(UserError, match="too long"):
        path_component("x" * 300)


def test_eval_writes_every_instance_inside_its_output_folder(tmp_path: Path) -> None:
    base = read_jsonl(TASKS_FILE)[0]
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [{**base, "instance_id": i, "repo": str((TASKS_FILE.parent / base["repo"]).resolve())} for i in TRICKY])
    preds = write_jsonl(tmp_path / "preds.jsonl", [{"instance_id": i, "model_name_or_path": "..", "model_patch": ""} for i in TRICKY])
    out = tmp_path / "deep" / "out"
    argv = ["eval", str(preds), "--tasks", str(tasks), "-o", str(out), "--sandbox", "local", "--json",
            "--allow-path", str(TASKS_FILE.parent)]
    assert run(argv) == 0
    written = sorted(p for p in tmp_path.rglob("report.json"))
    assert len(written) == len(TRICKY) + 1  # one per instance, and the summary
    for p in written:
        assert out.resolve() in p.resolve().parents
    assert not (tmp_path / "escape").exists() and not (tmp_path / "deep" / "escape").exists()


def test_eval_and_bench_refuse_an_output_path_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "afile"
    f.write_text("keep me")
    gold = TASKS_FILE.parent / "gold.jsonl"
    assert run(["eval", str(gold), "--tasks", str(TASKS_FILE), "-o", str(f), "--sandbox", "local"]) == 2
    assert "is a file" in capsys.readouterr().err
    assert run(["bench", str(TASKS_FILE), "-o", str(f), "--sandbox", "local", "--model", "replay:missing.json"]) == 2
    assert f.read_text() == "keep me"


def test_bench_keeps_x_slash_1_and_x_underscore_1_apart(tmp_path: Path) -> None:
    base = read_jsonl(TASKS_FILE)[0]
    ids = ["x/1", "x_1", ".."]
    # a repository that cannot be set up: each task ends quickly as env_error, but still gets its own folder
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [{**base, "instance_id": i, "repo": "does-not-exist"} for i in ids])
    cassette = tmp_path / "c.json"
    cassette.write_text(json.dumps({"version": 1, "entries": []}))
    out = tmp_path / "run"
    run(["bench", str(tasks), "-o", str(out), "--sandbox", "local", "--model", f"replay:{cassette}"])
    folders = sorted(p.name for p in (out / "instances").iterdir())
    assert folders == sorted(path_component(i) for i in ids)
    report = json.loads((out / "report.json").read_text())
    assert sorted(report["instances"]) == sorted(ids)
    assert not (out / "outcome.json").exists()  # ".." did not land in the run root
