"""`agentflow run` end to end in-process: outputs, run directory, approve/edit, and the bad-input corpus
(each one line on stderr, exit 2, no traceback)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agentflow.cli.main import run

HERE = Path(__file__).parent
APPROVAL = str(HERE / "approval.yaml")


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_run_shipped_demo_writes_run_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["run", "demo", "--json", "-o", str(tmp_path), "--input", '{"topic": "x", "rounds": 2}']) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert lines[0]["event"] == "run.start" and lines[0]["thread_id"] == lines[-1]["thread_id"]  # the thread first
    ends = [e for e in lines if e["event"] == "node.end"]
    assert ends[-1]["node"] == "summarize" and ends[-1]["update"] == {"summary": "x: 5 notes after 2 rounds"}
    # every node that started ended (parallel branches may end in another order than they started)
    assert sorted(e["node"] for e in lines if e["event"] == "node.start") == sorted(e["node"] for e in ends)
    result = lines[-1]
    assert result["status"] == "done" and result["state"]["summary"] == "x: 5 notes after 2 rounds"
    rdir = Path(result["run_dir"])
    assert {p.name for p in rdir.iterdir()} >= {
        "config.resolved.yaml",
        "events.jsonl",
        "checkpoints.db",
        "run.json",
    }
    assert "workflow: demo" in (rdir / "config.resolved.yaml").read_text()
    kinds = [json.loads(line)["kind"] for line in (rdir / "events.jsonl").read_text().splitlines()]
    assert kinds[0] == "run.start" and kinds[-1] == "run.end" and kinds.count("node.end") == 6


def test_plain_output_and_input_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inp = tmp_path / "in.json"
    inp.write_text('{"rounds": 1}')
    assert run(["run", "demo", "-o", str(tmp_path / "runs"), "--input", f"@{inp}"]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)  # stdout: the final state alone; the run line and progress on stderr
    out = captured.err.splitlines()
    assert out[0].startswith("run demo-") and " · thread " in out[0]  # without a TTY too, the thread comes first
    assert any(line.endswith("] summarize: started") for line in out)
    assert any(re.search(r"\] summarize: done in \d+\.\ds \(summary\)$", line) for line in out), out
    assert any("done (thread" in line for line in out)


def test_approve_and_edit_from_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = str(tmp_path)
    assert run(["run", APPROVAL, "--json", "-o", runs, "--thread-id", "a1", "-i", '{"topic": "cats"}']) == 0
    paused = last_json(capsys.readouterr().out)
    assert paused["status"] == "interrupted"
    assert paused["interrupt"]["message"] == "Publish this draft?"
    assert paused["interrupt"]["state"] == {"draft": "draft about cats"}

    assert run(["run", APPROVAL, "-o", runs, "--resume", "a1"]) == 2
    assert "waits for approval at node 'review'" in capsys.readouterr().err

    assert run(["run", APPROVAL, "--json", "-o", runs, "--resume", "a1", "--approve"]) == 0
    assert last_json(capsys.readouterr().out)["state"]["published"] == "DRAFT ABOUT CATS"

    assert run(["run", APPROVAL, "--json", "-o", runs, "--thread-id", "e1", "-i", '{"topic": "dogs"}']) == 0
    capsys.readouterr()
    assert (
        run(["run", APPROVAL, "--json", "-o", runs, "--resume", "e1", "--edit", '{"draft": "better"}']) == 0
    )
    assert last_json(capsys.readouterr().out)["state"]["published"] == "BETTER"


def _bad_inputs(tmp_path: Path) -> dict[str, list[str]]:
    malformed = tmp_path / "malformed.yaml"
    malformed.write_text("name: x\nnodes: [unclosed\n")
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("name: u\nnodes:\n  a: {fn: 'tests.graph.nodes:publish', next: ghost}\n")
    bad_fn = tmp_path / "badfn.yaml"
    bad_fn.write_text("name: b\nnodes:\n  a: {fn: 'tests.graph.nodes:nope', next: END}\n")
    bad_key = tmp_path / "badkey.yaml"
    bad_key.write_text("name: k\nnodez: {}\n")
    o = str(tmp_path / "runs")
    return {
        "malformed YAML": ["run", str(malformed), "-o", o],
        "unknown node": ["run", str(unknown), "-o", o],
        "missing function": ["run", str(bad_fn), "-o", o],
        "unknown top-level key": ["run", str(bad_key), "-o", o],
        "unknown workflow": ["run", "no-such-workflow", "-o", o],
        "bad model spec": ["run", "demo", "--model", "gpt4", "-o", o],
        "unreadable input file": ["run", "demo", "--input", f"@{tmp_path / 'missing.json'}", "-o", o],
        "input not JSON": ["run", "demo", "--input", "{nope", "-o", o],
        "input unknown key": ["run", "demo", "--input", '{"bogus": 1}', "-o", o],
        "bad -c override": ["run", "demo", "-c", "keep_last=[", "-c", "no_such_setting=1", "-o", o],
        "-c without =": ["run", "demo", "-c", str(tmp_path / "missing.yaml"), "-o", o],
        "unknown thread": ["run", "demo", "--resume", "nobody", "-o", o],
        "approve without resume": ["run", "demo", "--approve", "-o", o],
        "edit without resume": ["run", "demo", "--edit", '{"topic": "y"}', "-o", o],
        "input with resume": ["run", "--resume", "t1", "--input", '{"topic": "y"}', "-o", o],
        "no workflow": ["run", "-o", o],
        "at without fork": ["run", "demo", "--at", "abc", "-o", o],
        "fork with resume": ["run", "--fork", "t1", "--resume", "t1", "-o", o],
        "fork with input": ["run", "--fork", "t1", "--input", '{"topic": "y"}', "-o", o],
        "fork at and after": ["run", "--fork", "t1", "--at", "abc", "--after", "n", "-o", o],
        "apply without workspace": ["run", "demo", "--apply", "-o", o],
        "validate malformed": ["graph", "validate", str(malformed)],
        "show unknown": ["graph", "show", "nothing-here"],
    }


@pytest.mark.parametrize("case", list(_bad_inputs(Path("/tmp"))))
def test_bad_input_is_one_line_exit_2(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = _bad_inputs(tmp_path)[case]
    assert run(argv) == 2, case
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentflow: error: "), err
    assert "Traceback" not in err
