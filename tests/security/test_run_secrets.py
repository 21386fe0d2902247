"""Item 6, secrets in files meant to be shared: no file a run writes holds a secret the run knows.

Real runs against a real OpenAI-compatible server on loopback (tests/models/fake_llm_server.py) whose URL
carries a password (`http://user:PASSWORD@127.0.0.1:PORT/v1`), with an API key given with `-c` and the model
given in a config file: `agentflow bench` (the repair harness), `agentflow run` (an agent workflow, paused and
resumed), `agentflow eval` of predictions that name such a model, `agentflow view` of each, and the OTLP
spans of the bench run as a collector on loopback receives them. Every byte of every file (SQLite files
included), every file name, the viewer pages and the span payloads are searched for the secrets.
"""

from __future__ import annotations

import contextlib
import gzip
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentflow.cli.main import run
from tests.models.conftest import fake_server_process

from .conftest import GOLD_FILE, TASKS_FILE, read_jsonl, write_jsonl

API_KEY = "sk-TESTSECRET123"
PASSWORD = "hunter2pass"
SECRETS = (API_KEY.encode(), PASSWORD.encode())
REPO = Path(__file__).resolve().parents[2]
AGENT_WORKFLOW = str(REPO / "tests" / "graph" / "agent_approval.yaml")
CRITIQUE = '{"issues": [], "summary": "looks right"}'


def leaks(*roots: Path) -> list[str]:
    """Files (and file names) under `roots` that hold a secret, as `path: secret`."""
    found = []
    for root in roots:
        for path in [root, *root.rglob("*")] if root.is_dir() else [root]:
            name = str(path).encode()
            data = path.read_bytes() if path.is_file() else b""
            found += [f"{path}: {s.decode()}" for s in SECRETS if s in name or s in data]
    return found


@contextlib.contextmanager
def otlp_collector() -> Iterator[tuple[str, list[bytes]]]:
    """An OTLP/HTTP endpoint on loopback that keeps every request body (decompressed) as bytes."""
    bodies: list[bytes] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            bodies.append(gzip.decompress(body) if self.headers.get("Content-Encoding") == "gzip" else body)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()


def view(run_dir: Path, out: Path) -> Path:
    """`agentflow view` in a fresh process: it knows only what the run folder holds."""
    proc = subprocess.run(
        [sys.executable, "-m", "agentflow.cli.main", "view", str(run_dir), "-o", str(out)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return out


def test_no_secret_in_any_file_of_a_bench_run_its_spans_or_its_page(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    with fake_server_process() as server, otlp_collector() as (endpoint, bodies):
        model_file = tmp_path / "model.yaml"
        model_file.write_text(f"model: openai-compatible:http://user:{PASSWORD}@127.0.0.1:{server.port}/v1#tiny\n")
        code = run(["bench", str(TASKS_FILE), "-i", "inikit__inikit-1", "--sandbox", "local", "-o", str(out),
                    "-c", str(model_file), "-c", f"model_options.api_key={API_KEY}",
                    "-c", "model_options.max_attempts=1", "-c", "feedback=task", "-c", f"trace.endpoint={endpoint}"])
        assert code == 0
        calls = server.requests()
    # the run used the URL's password (the HTTP client sends it as basic auth)
    assert calls and calls[0]["headers"]["authorization"].startswith("Basic ")
    names = {p.name for p in out.rglob("*")}
    assert {"config.resolved.yaml", "events.jsonl", "preds.jsonl", "report.json", "calls.db",
            "checkpoints.db"} <= names
    (pred,) = read_jsonl(out / "preds.jsonl")
    assert pred["model_name_or_path"] == f"openai-compatible:http://user:***@127.0.0.1:{server.port}/v1#tiny"
    assert bodies, "no span reached the collector"
    assert [s.decode() for s in SECRETS if any(s in b for b in bodies)] == []
    assert leaks(out, view(out, tmp_path / "bench.html")) == []


def test_a_bench_resume_asks_for_the_masked_secrets_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench"
    model_file = tmp_path / "model.yaml"
    model_file.write_text(f"model: openai-compatible:http://user:{PASSWORD}@127.0.0.1:9/v1#tiny\n")
    argv = ["bench", str(TASKS_FILE), "-i", "inikit__inikit-1", "--sandbox", "local", "-o", str(out),
            "-c", str(model_file), "-c", "model_options.max_attempts=1", "-c", "model_options.timeout_s=5"]
    assert run([*argv, "-c", f"model_options.api_key={API_KEY}"]) == 0  # nothing listens: an env_error
    assert "api_key: '***'" in (out / "config.resolved.yaml").read_text()
    capsys.readouterr()
    assert run([*argv, "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model_options.api_key" in err and "give it again" in err, err
    assert run([*argv, "--resume", "-c", f"model_options.api_key={API_KEY}"]) == 0
    assert leaks(out) == []


def test_no_secret_in_the_files_of_an_eval_of_such_predictions(tmp_path: Path) -> None:
    """Predictions naming a model URL with a password (as files from older runs do)."""
    (gold,) = [g for g in read_jsonl(GOLD_FILE) if g["instance_id"] == "inikit__inikit-1"]
    preds = write_jsonl(tmp_path / "preds.jsonl", [
        {**gold, "model_name_or_path": f"openai-compatible:http://user:{PASSWORD}@127.0.0.1:9/v1#tiny"}
    ])
    out = tmp_path / "eval"
    assert run(["eval", str(preds), "--tasks", str(TASKS_FILE), "--sandbox", "local", "-o", str(out)]) == 0
    assert json.loads((out / "report.json").read_text())["resolved_instances"] == 1
    assert list(out.rglob("run_instance.log"))
    assert leaks(out, view(out, tmp_path / "eval.html")) == []


def test_no_secret_in_the_files_of_a_workflow_run_and_its_resume(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    with fake_server_process() as server:
        server.script({"content": CRITIQUE}, {"content": CRITIQUE})
        model = f"openai-compatible:http://user:{PASSWORD}@127.0.0.1:{server.port}/v1#tiny"
        assert run(["run", AGENT_WORKFLOW, "-m", model, "-o", str(runs), "--thread-id", "w1", "--json",
                    "-i", '{"task": "review the change"}']) == 0
        (rdir,) = runs.iterdir()
        assert leaks(runs) == []
        # the recorded model had its password masked: a resume names the model again
        assert run(["run", "-o", str(runs), "--resume", "w1", "--approve", "--json", "-m", model]) == 0
        assert len(server.requests()) == 2
    assert json.loads((rdir / "run.json").read_text())["model"].startswith("openai-compatible:http://user:***@")
    assert leaks(runs, view(rdir, tmp_path / "run.html")) == []


def test_a_resume_without_the_masked_model_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    with fake_server_process() as server:
        server.script({"content": CRITIQUE})
        model = f"openai-compatible:http://user:{PASSWORD}@127.0.0.1:{server.port}/v1#tiny"
        assert run(["run", AGENT_WORKFLOW, "-m", model, "-o", str(runs), "--thread-id", "w2",
                    "-i", '{"task": "t"}']) == 0
        capsys.readouterr()
        assert run(["run", "-o", str(runs), "--resume", "w2", "--approve"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--model" in err and "redacted" in err, err


def test_view_of_a_run_folder_written_with_the_key_in_clear(tmp_path: Path) -> None:
    """A run folder from before this fix holds the key in config.resolved.yaml: the page must not."""
    rdir = tmp_path / "old"
    rdir.mkdir()
    (rdir / "config.resolved.yaml").write_text(f"model: openai:gpt-4o\nmodel_options:\n  api_key: {API_KEY}\n")
    (rdir / "events.jsonl").write_text(json.dumps({
        "ts": 1.0, "run_id": "old", "kind": "run.start", "data": {"note": f"key {API_KEY} used", "total": 1},
    }) + "\n")
    page = view(rdir, tmp_path / "old.html").read_bytes()
    assert API_KEY.encode() not in page
