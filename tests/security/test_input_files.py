"""Item 10b: a tasks, predictions, --input or cassette file nested too deeply to read, and an output folder (`-o`) that cannot be one,
are one-line errors naming the file (and line) and the fix: exit 2, no traceback (the real CLI, in a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import GOLD_FILE, TASKS_FILE, read_jsonl

ROOT = Path(__file__).resolve().parents[2]
DEEP = "[" * 100_000 + "]" * 100_000  # one JSON value nested 100000 levels: json.loads recurses per level


def cli(*argv: str, cwd: Path) -> tuple[int, list[str], str]:
    """Exit code, the lines of stderr that are not warnings, and all of stderr."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "agentflow.cli.main", *argv], check=False, cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("agentflow: warning:")]
    return proc.returncode, lines, proc.stderr


def _write_deep_files(folder: Path) -> None:
    good_task = read_jsonl(TASKS_FILE)[0]
    (folder / "deep.jsonl").write_text(json.dumps(good_task) + "\n" + DEEP + "\n")
    (folder / "deep.json").write_text(DEEP)
    deep_field = {**good_task, "FAIL_TO_PASS": DEEP}  # SWE-bench's JSON-encoded test list, nested too deeply
    (folder / "field.jsonl").write_text(json.dumps(deep_field) + "\n")


def _deep_files() -> dict[str, tuple[list[str], str]]:
    """case -> (argv, what the error must name)."""
    gold = str(GOLD_FILE)
    return {
        "tasks line (eval)": (["eval", gold, "--tasks", "deep.jsonl"], "deep.jsonl:2: malformed task line"),
        "tasks line (bench)": (["bench", "deep.jsonl", "-o", "out"], "deep.jsonl:2: malformed task line"),
        "tasks .json file": (["eval", gold, "--tasks", "deep.json"], "deep.json: invalid JSON"),
        "preds line": (["eval", "deep.jsonl", "--tasks", str(TASKS_FILE)], "deep.jsonl:2: malformed prediction line"),
        "preds .json file": (["eval", "deep.json", "--tasks", str(TASKS_FILE)], "deep.json: invalid JSON"),
        "test list in a task": (["eval", gold, "--tasks", "field.jsonl"], "field.jsonl:1: malformed task: field FAIL_TO_PASS"),
        "run --input @file": (["run", "demo", "-o", "out", "--input", "@deep.json"], "deep.json: invalid JSON"),
        "replay cassette": (["run", "plan_code_critique", "--model", "replay:deep.json", "-o", "out", "--input",
                             '{"task": "x"}'], "cassette deep.json: invalid JSON"),
    }


@pytest.mark.parametrize("case", list(_deep_files()))
def test_json_nested_too_deeply_is_a_one_line_error(case: str, tmp_path: Path) -> None:
    _write_deep_files(tmp_path)
    argv, names = _deep_files()[case]
    code, lines, err = cli(*argv, cwd=tmp_path)
    assert code == 2 and "Traceback" not in err, err[-2000:]
    assert len(lines) == 1 and names in lines[0] and "nested too deeply" in lines[0], err
    assert "flatten" in lines[0] or "flat list" in lines[0]  # the fix


def _bad_outputs() -> dict[str, tuple[list[str], str]]:
    workflow = str(ROOT / "tests/graph/approval.yaml")
    run = ["run", workflow, "--input", '{"topic": "x"}', "-o"]
    long = "x" * 300
    return {
        "run -o a file": ([*run, "afile"], "afile is a file, not a folder"),
        "run -o below a file": ([*run, "afile/sub"], "afile is a file, not a folder"),
        "run -o a name too long": ([*run, long], "File name too long"),
        "bench -o below a file": (["bench", str(TASKS_FILE), "--sandbox", "local", "--model", "replay:none.json",
                                   "-o", "afile/sub"], "afile is a file, not a folder"),
        "eval -o below a file": (["eval", str(GOLD_FILE), "--tasks", str(TASKS_FILE), "--sandbox", "local",
                                  "-o", "afile/sub"], "afile is a file, not a folder"),
    }


@pytest.mark.parametrize("case", list(_bad_outputs()))
def test_an_output_folder_that_cannot_be_one_is_a_one_line_error(case: str, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("keep me")
    argv, names = _bad_outputs()[case]
    code, lines, err = cli(*argv, cwd=tmp_path)
    assert code == 2 and "Traceback" not in err, err[-2000:]
    assert len(lines) == 1 and names in lines[0] and "give -o a folder" in lines[0], err
    assert (tmp_path / "afile").read_text() == "keep me"


def test_a_run_folder_with_lines_nested_too_deeply_still_opens_in_the_viewer(tmp_path: Path) -> None:
    """agentflow never writes such lines; a tampered run folder's are skipped like torn ones, the rest shown."""
    from tests.observe.synthetic import write_synthetic_run

    run_dir = write_synthetic_run(tmp_path / "run", tasks=2, nodes_per_task=3)
    for name in ("events.jsonl", "preds.jsonl", "candidates.jsonl"):
        with (run_dir / name).open("a", encoding="utf-8") as fh:
            fh.write(DEEP + "\n")
    (run_dir / "report.json").write_text(DEEP)
    code, lines, err = cli("view", str(run_dir), "-o", str(tmp_path / "page.html"), cwd=tmp_path)
    assert code == 2 and "Traceback" not in err, err[-2000:]
    assert len(lines) == 1 and "report.json" in lines[0] and "not readable as JSON" in lines[0], err
    (run_dir / "report.json").unlink()
    code, lines, err = cli("view", str(run_dir), "-o", str(tmp_path / "page.html"), cwd=tmp_path)
    assert code == 0 and "Traceback" not in err, err[-2000:]
    page = (tmp_path / "page.html").read_text()
    assert "synth__pkg-1" in page  # the rest of the run is shown
