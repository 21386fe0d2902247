"""Item 6 (and issue #50 part 5), secrets at every boundary: no byte a run writes or prints holds a secret.

Each kind of secret the run knows is tried on its own: a key given with `-c model_options.api_key=...`, the
password of a model URL (in a config file or `-m`), and the value of a credential-named variable
(`FOO_API_KEY`). A real OpenAI-compatible server on loopback (tests/models/fake_llm_server.py) puts the secret
in what the run sees: its replies quote it (a succeeding run), or it rejects the calls with an error message
that quotes it (a failing run: the secret travels inside an exception, which LangGraph also writes to the
checkpoint), or nothing listens at `http://user:PASSWORD@127.0.0.1:1` (a connection error naming the URL).

`agentflow bench`, `agentflow run` (with its live `--json` stream, paused and resumed), `agentflow eval` and
`agentflow view` run as CLI processes; every byte of their stdout and stderr, of every file under their
folders (SQLite cells and zstd/gzip blobs opened) and every path name, the pages, and the OTLP spans a
collector on loopback receives, are searched for the secret. That the secret went through is checked too:
its mask (`***`) shows up.
"""

from __future__ import annotations

import contextlib
import gzip
import http.server
import json
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import zstandard

from agentflow.cli.main import run
from tests.models.conftest import FakeServer, fake_server_process

from .conftest import GOLD_FILE, TASKS_FILE, read_jsonl, write_jsonl

API_KEY = "sk-TESTSECRET123"
PASSWORD = "hunter2pass"
ENV_NAME, ENV_VALUE = "FOO_API_KEY", "envSECRETvalue77"
MASK = b"***"
REPO = Path(__file__).resolve().parents[2]
AGENT_WORKFLOW = str(REPO / "tests" / "graph" / "agent_approval.yaml")
CRITIQUE = '{"issues": [], "summary": "looks right"}'
INSTANCE = "inikit__inikit-1"


@dataclass
class Kind:
    """One kind of secret: how the run is given it, and how it shows up in what the model server says."""

    name: str
    secret: str
    env: dict[str, str] = field(default_factory=dict)

    def model(self, port: int) -> str:
        userinfo = f"user:{PASSWORD}@" if self.name == "url_password" else ""
        return f"openai-compatible:http://{userinfo}127.0.0.1:{port}/v1#tiny"

    def options(self) -> list[str]:
        return ["-c", f"model_options.api_key={API_KEY}"] if self.name == "config_key" else []

    def quoted(self, port: int) -> str:
        """The secret as a server would quote it back (an error echoing the request, a reply repeating it)."""
        if self.name == "url_password":
            return f"http://user:{PASSWORD}@127.0.0.1:{port}/v1"
        if self.name == "config_key":
            return f"Incorrect API key provided: {API_KEY}"
        return f"{ENV_NAME}={ENV_VALUE}"


KINDS = {
    "config_key": Kind("config_key", API_KEY),
    "url_password": Kind("url_password", PASSWORD),
    "env_key": Kind("env_key", ENV_VALUE, {ENV_NAME: ENV_VALUE}),
}
RUN_CASES = [(k, o) for k in ("url_password", "env_key") for o in ("succeeds", "fails")] + [
    ("url_password", "unreachable")
]


# -- where bytes go ------------------------------------------------------------------------------------------


def _opened(data: bytes) -> Iterator[bytes]:
    """`data`, and what it holds compressed (zstd frames, gzip)."""
    yield data
    with contextlib.suppress(zstandard.ZstdError, OSError, EOFError):
        if data.startswith(b"\x28\xb5\x2f\xfd"):
            yield zstandard.ZstdDecompressor().decompressobj().decompress(data)
        elif data.startswith(b"\x1f\x8b"):
            yield gzip.decompress(data)


def _sqlite_cells(path: Path) -> Iterator[bytes]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in con.execute(f'SELECT * FROM "{table}"'):
                for cell in row:
                    if isinstance(cell, bytes):
                        yield from _opened(cell)
                    elif isinstance(cell, str):
                        yield cell.encode()
    finally:
        con.close()


def file_bytes(path: Path) -> Iterator[bytes]:
    """Every form of a file's content a reader can get at: raw, decompressed, and each SQLite cell."""
    data = path.read_bytes()
    yield from _opened(data)
    if data.startswith(b"SQLite format 3\x00"):
        yield from _sqlite_cells(path)


def leaks(secret: str, *roots: Path) -> list[str]:
    """Files (and file names) under `roots` that hold `secret`."""
    needle, found = secret.encode(), []
    for root in roots:
        for path in [root, *root.rglob("*")] if root.is_dir() else [root]:
            if needle in str(path).encode() or (path.is_file() and any(needle in b for b in file_bytes(path))):
                found.append(str(path))
    return found


def masked_somewhere(*roots: Path) -> bool:
    """Whether a file under `roots`, or a path name (where the mask is percent-encoded), holds the mask."""
    paths = [p for root in roots for p in root.rglob("*")]
    return any("%2A%2A%2A" in p.name or "***" in p.name for p in paths) or any(
        MASK in b for p in paths if p.is_file() for b in file_bytes(p)
    )


@dataclass
class Printed:
    """Everything the CLI processes of one case printed, by process."""

    streams: dict[str, bytes] = field(default_factory=dict)

    def cli(self, label: str, args: list[str], env: dict[str, str], *, codes: tuple[int, ...] = (0,)) -> None:
        proc = subprocess.run(
            [sys.executable, "-m", "agentflow.cli.main", *args], cwd=REPO, capture_output=True, timeout=600,
            env={**os.environ, "PYTHONPATH": str(REPO), **env}, check=False,
        )
        self.streams[f"{label} stdout"], self.streams[f"{label} stderr"] = proc.stdout, proc.stderr
        assert proc.returncode in codes, (proc.returncode, proc.stderr.decode()[-2000:])

    def leaks(self, secret: str) -> list[str]:
        return [name for name, data in self.streams.items() if secret.encode() in data]

    def masked(self) -> bool:
        return any(MASK in data for data in self.streams.values())


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


def script_server(server: FakeServer, kind: Kind, outcome: str, reply: str, steps: int) -> None:
    """Replies that quote the secret, or errors whose message quotes it."""
    quoted = kind.quoted(server.port)
    if outcome == "fails":
        error = {"status": 400, "body": {"error": {"message": f"rejected the request: {quoted}", "type": "bad"}}}
        server.script(*[error] * steps)
    else:
        server.script(*[{"content": reply.replace("looks right", f"looks right ({quoted})")}] * steps)


def view(printed: Printed, label: str, run_dir: Path, out: Path, env: dict[str, str]) -> Path:
    """`agentflow view` in a fresh process: it knows only what the run folder (and its environment) holds."""
    printed.cli(f"view {label}", ["view", str(run_dir), "-o", str(out)], env)
    return out


def assert_no_secret(kind: Kind, printed: Printed, bodies: list[bytes], *roots: Path) -> None:
    assert leaks(kind.secret, *roots) == []
    assert printed.leaks(kind.secret) == []
    assert [i for i, b in enumerate(bodies) if kind.secret.encode() in b] == []
    # the secret went through: its mask is what the run kept of it
    assert printed.masked() or masked_somewhere(*[r for r in roots if r.is_dir()])


# -- the cases -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind_name", "outcome"), RUN_CASES)
def test_no_secret_in_any_byte_of_a_workflow_run(kind_name: str, outcome: str, tmp_path: Path) -> None:
    kind, runs, printed = KINDS[kind_name], tmp_path / "runs", Printed()
    with fake_server_process() as server, otlp_collector() as (endpoint, bodies):
        model = kind.model(1 if outcome == "unreachable" else server.port)
        script_server(server, kind, outcome, CRITIQUE, steps=8)
        args = ["-m", model, "-o", str(runs), "--json", "-c", f"trace.endpoint={endpoint}"]
        task = json.dumps({"task": f"review the change; {kind.quoted(server.port)}"})
        printed.cli("run", ["run", AGENT_WORKFLOW, "--thread-id", "t1", "-i", task, *args], kind.env,
                    codes=(0,) if outcome == "succeeds" else (1,))
        if outcome == "succeeds":  # paused at the approval: resume it to the end
            printed.cli("resume", ["run", "--resume", "t1", "--approve", *args], kind.env)
        (rdir,) = runs.iterdir()
        page = view(printed, "run", rdir, tmp_path / "run.html", kind.env)
    assert bodies, "no span reached the collector"
    last = "resume" if outcome == "succeeds" else "run"
    result = json.loads(printed.streams[f"{last} stdout"].splitlines()[-1])  # the live --json stream's last line
    assert result["event"] == "result" and result["status"] == ("done" if outcome == "succeeds" else "failed")
    assert_no_secret(kind, printed, bodies, runs, page)
    if outcome != "succeeds":  # the exception LangGraph checkpoints as the node's error: masked, not dropped
        (db,) = rdir.glob("checkpoints.db")
        assert any(MASK in cell and b"Failed" in cell for cell in file_bytes(db))


@pytest.mark.parametrize("outcome", ["succeeds", "fails"])
@pytest.mark.parametrize("kind_name", list(KINDS))
def test_no_secret_in_any_byte_of_a_bench(kind_name: str, outcome: str, tmp_path: Path) -> None:
    kind, out, printed = KINDS[kind_name], tmp_path / "bench", Printed()
    with fake_server_process() as server, otlp_collector() as (endpoint, bodies):
        model_file = tmp_path / "model.yaml"  # the model (and a URL's password) given in a config file
        model_file.write_text(f"model: {kind.model(server.port)}\n")
        script_server(server, kind, outcome, f"I looked at it. {CRITIQUE}", steps=40)
        printed.cli("bench", ["bench", str(TASKS_FILE), "-i", INSTANCE, "--sandbox", "local", "-o", str(out),
                              "-c", str(model_file), *kind.options(), "-c", "model_options.max_attempts=1",
                              "-c", "tests.feedback=task", "-c", "mutants=false", "-c", f"trace.endpoint={endpoint}"], kind.env)
        calls = server.requests()
        page = view(printed, "bench", out, tmp_path / "bench.html", kind.env)
    assert calls, "the model server was never called"
    if kind_name == "url_password":  # the run used the URL's password (the HTTP client sends it as basic auth)
        assert calls[0]["headers"]["authorization"].startswith("Basic ")
    if kind_name == "config_key":
        assert calls[0]["headers"]["authorization"] == f"Bearer {API_KEY}"
    assert {"config.resolved.yaml", "events.jsonl", "preds.jsonl", "calls.db"} <= {p.name for p in out.rglob("*")}
    assert bodies, "no span reached the collector"
    assert_no_secret(kind, printed, bodies, out, page)


@pytest.mark.parametrize("outcome", ["succeeds", "fails"])
@pytest.mark.parametrize("kind_name", ["url_password", "env_key"])
def test_no_secret_in_any_byte_of_an_eval(kind_name: str, outcome: str, tmp_path: Path) -> None:
    """Predictions that name the secret (as files from older runs do); a failing one does not apply."""
    kind, out, printed = KINDS[kind_name], tmp_path / "eval", Printed()
    (gold,) = [g for g in read_jsonl(GOLD_FILE) if g["instance_id"] == INSTANCE]
    patch = gold["model_patch"] if outcome == "succeeds" else "diff --git a/nope b/nope\n--- a/nope\n+++ b/nope\n"
    preds = write_jsonl(tmp_path / "preds.jsonl", [
        {**gold, "model_patch": patch, "model_name_or_path": f"{kind.model(9)} {kind.quoted(9)}"}
    ])
    printed.cli("eval", ["eval", str(preds), "--tasks", str(TASKS_FILE), "--sandbox", "local", "-o", str(out)],
                kind.env)
    report = json.loads((out / "report.json").read_text())
    assert report["resolved_instances"] == (1 if outcome == "succeeds" else 0)
    page = view(printed, "eval", out, tmp_path / "eval.html", kind.env)
    assert_no_secret(kind, printed, [], out, page)


# -- resume after redaction ----------------------------------------------------------------------------------


def test_a_bench_resume_asks_for_the_masked_secrets_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench"
    model_file = tmp_path / "model.yaml"
    model_file.write_text(f"model: openai-compatible:http://user:{PASSWORD}@127.0.0.1:9/v1#tiny\n")
    argv = ["bench", str(TASKS_FILE), "-i", INSTANCE, "--sandbox", "local", "-o", str(out),
            "-c", str(model_file), "-c", "model_options.max_attempts=1", "-c", "model_options.timeout_s=5"]
    assert run([*argv, "-c", f"model_options.api_key={API_KEY}"]) == 0  # nothing listens: an env_error
    assert "api_key: '***'" in (out / "config.resolved.yaml").read_text()
    capsys.readouterr()
    assert run([*argv, "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model_options.api_key" in err and "give it again" in err, err
    assert run([*argv, "--resume", "-c", f"model_options.api_key={API_KEY}"]) == 0
    assert leaks(API_KEY, out) == [] and leaks(PASSWORD, out) == []


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
    printed = Printed()
    page = view(printed, "old", rdir, tmp_path / "old.html", {}).read_bytes()
    assert API_KEY.encode() not in page and printed.leaks(API_KEY) == []
