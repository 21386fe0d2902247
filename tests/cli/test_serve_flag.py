"""`--serve` on `agentflow run`, `repair` and `bench`: bad values fail in one line before anything starts;
a real llama-server (gemma3-270m) serves a workflow's model, its metrics reach the run's events, and it is
stopped when the command ends, fails, or is interrupted."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentflow.cli.main import run
from agentflow.events.kinds import RunEnd, RunStart
from tests.serving.conftest import require_llama

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = str(Path(__file__).with_name("served.yaml"))
SERVE = "llamacpp:gemma3-270m,parallel=2,ctx=512"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie has exited: only its parent's wait is missing
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def server_pid(err: str) -> int:
    match = re.search(r"ready in [\d.]+s \(pid (\d+)\)", err)
    assert match, err
    return int(match.group(1))


def one_line_error(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("agentflow: error: "), err
    assert "Traceback" not in err
    return lines[0]


BAD_VALUES = [
    ("bogus:model", "unknown server 'bogus'"),
    ("vllm:", "missing model"),
    ("llamacpp:gemma3-270m,parallel", "is not key=value"),
    ("llamacpp:gemma3-270m,parallel=many", "parallel: Input should be a valid integer"),
    ("llamacpp:gemma3-270m,color=red", "color: Extra inputs are not permitted"),
]


@pytest.mark.parametrize(("value", "needle"), BAD_VALUES)
def test_run_rejects_a_bad_serve_value_before_starting_anything(
    value: str, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs"
    assert run(["run", "demo", "-o", str(out), "--serve", value]) == 2
    assert needle in one_line_error(capsys.readouterr().err)
    assert not out.exists()  # no run directory: nothing started


@pytest.mark.parametrize("command", ["repair", "bench"])
@pytest.mark.parametrize(("value", "needle"), BAD_VALUES[:3])
def test_repair_and_bench_reject_a_bad_serve_value_first(
    command: str, value: str, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the other arguments are wrong too (no such repo / tasks file): --serve is checked before them
    target = str(tmp_path / "missing")
    args = [command, target, "--serve", value, "-o", str(tmp_path / "out")]
    if command == "repair":
        args += ["--issue", "it breaks"]
    assert run(args) == 2
    assert needle in one_line_error(capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


def test_a_server_that_fails_to_start_shows_its_log_tail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho 'error: this build cannot load the model' >&2\nexit 3\n")
    fake.chmod(0o755)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    out = tmp_path / "runs"
    code = run(["run", WORKFLOW, "-o", str(out), "--serve", f"llamacpp:{model},binary={fake}"])
    err = capsys.readouterr().err
    assert code == 1
    assert "exited with code 3 during start-up" in err
    assert "  | error: this build cannot load the model" in err
    assert "Traceback" not in err
    assert not out.exists()


def test_run_uses_the_served_model_records_metrics_and_stops_the_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_llama()
    assert run(["run", WORKFLOW, "--json", "-o", str(tmp_path), "--serve", SERVE]) == 0
    captured = capsys.readouterr()
    pid = server_pid(captured.err)
    assert not pid_alive(pid), "the server outlived the command"
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert result["status"] == "done"
    state = result["state"]
    assert (
        state["model"].startswith("openai-compatible:http://127.0.0.1:") and "#gemma3-270m" in state["model"]
    )
    assert state["text"].strip()
    rdir = Path(result["run_dir"])
    assert "serve: llamacpp:gemma3-270m" in (rdir / "config.resolved.yaml").read_text()
    events = [json.loads(line) for line in (rdir / "events.jsonl").read_text().splitlines()]
    metrics = [e for e in events if e["kind"] == "server.metrics"]
    assert metrics, [e["kind"] for e in events]
    data = metrics[-1]["data"]
    assert data.get("error") is None, data
    assert data["server"] == "llamacpp" and data["model"] == "gemma3-270m"
    assert data["generation_tokens_total"] >= 1  # the node's request went to this server


def test_model_flag_beats_serve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require_llama()
    cassette = tmp_path / "c.json"
    answer = {"choices": [{"message": {"role": "assistant", "content": "Paris."}, "finish_reason": "stop"}]}
    cassette.write_text(
        json.dumps({"version": 1, "match": "sequence", "interactions": [{"response": answer}]})
    )
    args = ["run", WORKFLOW, "--json", "-o", str(tmp_path), "--serve", SERVE, "--model", f"replay:{cassette}"]
    assert run(args) == 0
    captured = capsys.readouterr()
    assert not pid_alive(server_pid(captured.err))
    state = json.loads(captured.out.strip().splitlines()[-1])["state"]
    assert state == {**state, "text": "Paris.", "model": f"replay:{cassette}"}


def test_ctrl_c_stops_the_server(tmp_path: Path) -> None:
    require_llama()
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentflow.cli.main",
            "run",
            WORKFLOW,
            "-o",
            str(tmp_path),
            "--serve",
            SERVE,
            "--input",
            json.dumps({"pause": 60}),
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "AF_TEST_READY": str(ready)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the workflow never started"
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)  # generous: CI machines can be loaded
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    pid = server_pid(err)
    assert not pid_alive(pid), "the server outlived Ctrl-C"
    assert "Traceback" not in err


def test_repair_runs_get_the_served_model_a_loader_and_metrics_per_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run_batch_cli` (what repair and bench call) with a stand-in `run_batch` that does what the real one
    does with the hooks: load the coder's model through `model_loader`, report each finished task."""
    require_llama()
    from types import SimpleNamespace

    from agentflow.cli.parts import serve_flag
    from agentflow.cli.repair.repair_options import run_batch_cli
    from agentflow.events import EventLog
    from agentflow.models.base import ChatRequest, Message
    from agentflow.repair.config import load_repair_config
    from agentflow.repair.run import runs

    other = tmp_path / "other.json"
    other.write_text(json.dumps({"version": 1, "match": "sequence", "interactions": []}))
    handles: list[Any] = []
    seen: dict[str, Any] = {}
    real_start = serve_flag.start_with_progress

    def remember(handle: Any, **kwargs: Any) -> None:
        handles.append(handle)
        real_start(handle, **kwargs)

    async def fake_run_batch(
        tasks: list[str],
        cfg: Any,
        out_dir: Path,
        *,
        on_progress: Any = None,
        model_loader: Any = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        seen["model"], seen["pid"] = cfg.model, handles[-1].pid
        with EventLog(Path(out_dir) / "events.jsonl", run_id="r") as events:
            events.write(RunStart())
            if cfg.model == handles[-1].spec:
                coder = model_loader(cfg.model)
                seen["reply"] = (
                    await coder.chat(ChatRequest(messages=[Message.user("Hi")], max_tokens=4))
                ).text
                await coder.aclose()
            seen["other"] = type(model_loader(f"replay:{other}")).__name__
            for task in tasks:
                on_progress(SimpleNamespace(), SimpleNamespace(instance_id=task))
            events.write(RunEnd())
        return {"ok": True}

    monkeypatch.setattr(runs, "run_batch", fake_run_batch)
    monkeypatch.setattr(serve_flag, "start_with_progress", remember)
    cfg = load_repair_config([])
    assert run_batch_cli(["t1", "t2"], cfg, tmp_path, serve=SERVE, model_set=False) == {"ok": True}
    assert seen["model"] == handles[0].spec and isinstance(seen["reply"], str)
    assert seen["other"] == "ReplayModel"  # other specs load as usual
    assert not pid_alive(seen["pid"])
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in events] == ["run.start", "server.metrics", "server.metrics", "run.end"]
    assert [e["node_id"] for e in events[1:3]] == ["t1", "t2"]
    assert events[1]["data"]["generation_tokens_total"] >= 1

    cfg = load_repair_config(["model=replay:x.json"])  # the user's own model is kept
    run_batch_cli(["t"], cfg, tmp_path / "b", serve=SERVE, model_set=True)
    assert seen["model"] == "replay:x.json"
