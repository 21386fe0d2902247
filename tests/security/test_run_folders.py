"""Run folders are data, bound to their owner (issue #50, part 2).

A real run of the shipped plan_code_critique (model from `-m`, a replay cassette) pauses at its approval node.
A copy of its folder "from elsewhere" has a run.json naming another sandbox (`local`), a model URL (a
recording HTTP server on loopback), another workspace (`--apply`'s target) and a workflow whose Python
leaves a marker when imported; its MAC is missing, made with another key, or the user's own MAC over other
values. Resume, fork, `--history` and `view` then run nothing it names and send nothing anywhere; naming the
workflow (and model) on the command line runs that instead.

Symbolic links a folder brings (every file name the writers and the viewer use, their temporary names, the
sub-folders) are never written through or read into a page; a checkpoint naming an agentflow module that is
not an allowed type is refused without importing it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agentflow.cli.main import run
from agentflow.errors import UserError
from agentflow.runrecord import MAC_FIELD, SIGNED_FIELDS, verified

REPO = Path(__file__).resolve().parents[2]
THREAD = "t1"
PLAN = {"goal": "fix add", "steps": [{"description": "return a + b", "files": ["calc.py"]}]}


class Recorder:
    """An HTTP server on loopback that records every request it gets (and answers 500)."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                owner.requests.append(f"{self.command} {self.path} {dict(self.headers)}")
                self.send_response(500)
                self.end_headers()

            do_GET = do_POST = _any

            def log_message(self, *args: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.close()


def _cassette(path: Path, contents: list[str]) -> Path:
    replies = [{"response": {"choices": [{"message": {"role": "assistant", "content": c}, "finish_reason": "stop"}],
                             "usage": {"input_tokens": 10, "output_tokens": 5}, "model": "scripted"}}
               for c in contents]
    path.write_text(json.dumps({"version": 1, "match": "sequence", "interactions": replies}))
    return path


def own_paused_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    """The user's own run, paused at approve_plan: (its folder, the model spec it was run with)."""
    model = f"replay:{_cassette(tmp_path / 'plan.json', [json.dumps(PLAN)])}"
    runs = tmp_path / "runs"
    assert run(["run", "plan_code_critique", "-m", model, "--sandbox", "none", "-o", str(runs),
                "--thread-id", THREAD, "--json", "-i", '{"task": "add() subtracts"}']) == 0
    capsys.readouterr()
    (folder,) = [p.parent for p in runs.glob("*/run.json")]
    return folder, model


class Elsewhere:
    """What a folder from elsewhere points at: a workflow whose Python marks its import, a workspace."""

    def __init__(self, root: Path, recorder: Recorder) -> None:
        root.mkdir()
        self.marker = root / "imported"
        (root / "evil.py").write_text(
            f"from pathlib import Path\nPath({str(self.marker)!r}).write_text('x')\n\n\n"
            "def go(state):\n    return {}\n")
        self.workflow = root / "evil.yaml"
        self.workflow.write_text(json.dumps({
            "name": "evil", "state": {"task": {"type": "str"}},
            "nodes": {"go": {"fn": "evil:go", "next": "END"}}}))
        self.workspace = root / "workspace"
        self.workspace.mkdir()
        (self.workspace / "keep.txt").write_text("the user's file\n")
        self.values = {"workflow": str(self.workflow), "model": f"openai-compatible:{recorder.url}#m",
                       "sandbox": "local", "workspace": str(self.workspace), "config": ["keep_last=3"]}

    def untouched(self) -> bool:
        files = sorted(p.relative_to(self.workspace) for p in self.workspace.rglob("*"))
        return (not self.marker.exists() and files == [Path("keep.txt")]
                and (self.workspace / "keep.txt").read_text() == "the user's file\n")


def _other_key_mac(record: dict[str, Any]) -> str:
    signed = {name: record.get(name) for name in SIGNED_FIELDS}
    text = json.dumps(signed, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return "hmac-sha256:" + hmac.new(b"k" * 64, b"agentflow-run-record-v1\0" + text.encode(),
                                     hashlib.sha256).hexdigest()


def forge(folder: Path, elsewhere: Elsewhere, how: str, fields: tuple[str, ...]) -> None:
    """Rewrite run.json as a folder from elsewhere would hold it: `fields` from `elsewhere`, the MAC `how`."""
    record = json.loads((folder / "run.json").read_text())
    assert verified(record)
    user_mac = record[MAC_FIELD]
    record.update({k: elsewhere.values[k] for k in fields})
    if how == "unsigned":
        record.pop(MAC_FIELD)
    elif how == "another key":
        record[MAC_FIELD] = _other_key_mac(record)
    else:  # the user's own MAC, carried over to other values
        record[MAC_FIELD] = user_mac
    (folder / "run.json").write_text(json.dumps(record))


HOWS = ["unsigned", "another key", "the user's mac"]
FIELDS = [("workflow",), ("model",), ("sandbox",), ("workspace",), ("config",),
          ("workflow", "model", "sandbox", "workspace", "config")]
COMMANDS = {
    "resume": ["--resume", THREAD, "--approve"],
    "resume --apply": ["--resume", THREAD, "--approve", "--apply"],
    "fork": ["--fork", THREAD, "--after", "plan"],
    "history": ["--history", THREAD],
}


@pytest.mark.parametrize("fields", FIELDS, ids=["+".join(f) for f in FIELDS])
@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_folder_from_elsewhere_runs_nothing_it_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, recorder: Recorder,
    command: str, how: str, fields: tuple[str, ...],
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-users-own-key-0123456789")
    folder, _ = own_paused_run(tmp_path, capsys)
    elsewhere = Elsewhere(tmp_path / "elsewhere", recorder)
    forge(folder, elsewhere, how, fields)
    code = run(["run", "-o", str(folder.parent), *COMMANDS[command]])
    err = capsys.readouterr().err
    assert recorder.requests == [], "the folder's model URL was called"
    assert elsewhere.untouched(), "the folder's workflow was imported or its workspace written"
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert str(folder / "run.json") in err and "give them on the command line" in err, err


@pytest.mark.parametrize("how", HOWS)
def test_naming_the_workflow_and_model_runs_those_not_the_folders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, recorder: Recorder,
    how: str,
) -> None:
    """The fix the refusal names: what the command line gives is what runs (history, then a fork that pauses
    at the approval node again), and the folder's values are not used for anything left out."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-users-own-key-0123456789")
    folder, model = own_paused_run(tmp_path, capsys)
    elsewhere = Elsewhere(tmp_path / "elsewhere", recorder)
    forge(folder, elsewhere, how, ("workflow", "model", "sandbox", "workspace", "config"))
    runs = str(folder.parent)
    assert run(["run", "plan_code_critique", "-m", model, "-o", runs, "--history", THREAD, "--json"]) == 0
    code = run(["run", "plan_code_critique", "-m", model, "--sandbox", "none", "-o", runs, "--fork", THREAD,
                "--after", "plan", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["status"] == "interrupted" and result["interrupt"]["node"] == "approve_plan"
    assert recorder.requests == [] and elsewhere.untouched()
    fork_record = json.loads((Path(result["run_dir"]) / "run.json").read_text())
    assert verified(fork_record) and fork_record["model"] == model and fork_record["sandbox"] == "none"
    assert fork_record["config"] == [] and fork_record["workspace"] is None


@pytest.mark.parametrize("how", HOWS)
def test_view_of_a_folder_from_elsewhere_imports_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], recorder: Recorder, how: str
) -> None:
    folder, _ = own_paused_run(tmp_path, capsys)
    elsewhere = Elsewhere(tmp_path / "elsewhere", recorder)
    forge(folder, elsewhere, how, ("workflow", "model", "sandbox", "workspace"))
    assert run(["view", str(folder)]) == 0, capsys.readouterr().err
    assert (folder / "view.html").is_file()
    assert recorder.requests == [] and elsewhere.untouched()


def test_the_users_own_run_resumes_with_no_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The other side: a record the user's key signed gives its workflow, model and sandbox to a resume."""
    folder, _ = own_paused_run(tmp_path, capsys)
    assert run(["run", "-o", str(folder.parent), "--history", THREAD]) == 0
    assert "approve_plan" in capsys.readouterr().out


def test_the_run_key_is_a_private_file_of_the_users(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agentflow.runrecord import key_path

    own_paused_run(tmp_path, capsys)
    path = key_path()
    assert path.is_file() and not path.is_symlink() and path.stat().st_mode & 0o777 == 0o600
    assert Path(os.environ["AGENTFLOW_CONFIG_DIR"]) in path.parents  # the suite's, not the real home's
    key = path.read_text().strip()
    for written in (tmp_path / "runs").rglob("*"):
        if written.is_file():
            assert key.encode() not in written.read_bytes(), written


# -- links a folder brings: never written through --------------------------------------------------------------

OUTSIDE = "the user's file outside the run folder\n"


def _link(path: Path, target: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    path.symlink_to(target)


# Every name a writer of a run folder uses on a resume and a view, with the temporary names writers used
# (a writer must not open any planted name, whatever it is).
WRITTEN = ["run.json", "usage.json", "events.jsonl", "checkpoints.db", "checkpoints.db-wal", "checkpoints.db-shm",
           "patch.diff", "config.resolved.yaml", "view.html"]
TEMPORARY = [f"{name}.tmp" for name in WRITTEN]
# which of them a resume (no sandbox: no patch.diff) and a view open: a link there is refused, one line
OPENED = {"run": {"run.json", "usage.json", "events.jsonl", "checkpoints.db", "checkpoints.db-wal",
                  "checkpoints.db-shm"},
          "view": {"run.json", "usage.json", "events.jsonl", "config.resolved.yaml", "view.html"}}


@pytest.mark.parametrize("name", WRITTEN + TEMPORARY)
def test_a_resume_and_a_view_never_write_through_a_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    folder, model = own_paused_run(tmp_path, capsys)
    victim = tmp_path / "victim.txt"
    victim.write_text(OUTSIDE)
    _link(folder / name, victim)
    for argv in (["run", "-o", str(folder.parent), "-m", model, "--resume", THREAD, "--approve"],
                 ["view", str(folder)]):
        code = run(argv)
        err = capsys.readouterr().err
        assert victim.read_text() == OUTSIDE, f"{name}: written through by {argv[0]}"
        assert (folder / name).is_symlink(), f"{name}: the link was replaced"
        if name in OPENED[argv[0]]:
            assert code == 2 and "Traceback" not in err and name in err, (argv, err)


# What the page reads, by where it sits in a run folder (an eval's <model>/<instance>/ files included).
READ = ["events.jsonl", "run.json", "usage.json", "config.resolved.yaml", "report.json", "preds.jsonl",
        "candidates.jsonl", "instances/i1/outcome.json", "m/i1/patch.diff", "m/i1/run_instance.log"]
SECRET = "OUTSIDE-SECRET-7f3a9c"


# each file a link, and each file in a sub-folder with that folder a link out of the run folder
PAGE_CASES = [(name, "file") for name in READ] + [(name, "folder") for name in READ if "/" in name]


@pytest.mark.parametrize(("name", "linked"), PAGE_CASES, ids=[f"{n}-{k}" for n, k in PAGE_CASES])
def test_a_page_never_reads_through_a_link(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                           linked: str) -> None:
    folder, _ = own_paused_run(tmp_path, capsys)
    (folder / "m" / "i1").mkdir(parents=True)
    (folder / "m" / "i1" / "patch.diff").write_text("diff --git a/x b/x\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    line = json.dumps({"instance_id": "i1", "model_patch": SECRET, "ts": 1.0, "kind": SECRET, "run_id": SECRET,
                       "note": SECRET})
    if linked == "file":
        (outside / "data").write_text(line + "\n")
        _link(folder / name, outside / "data")
    else:  # the file's folder is a link out of the run folder
        first = Path(name).parts[0]
        shutil.copytree(folder / first, outside / first) if (folder / first).is_dir() else None
        sub = outside / first / Path(*Path(name).parts[1:])
        sub.parent.mkdir(parents=True, exist_ok=True)
        sub.write_text(line + "\n")
        if (folder / first).exists():
            shutil.rmtree(folder / first)
        _link(folder / first, outside / first)
    code = run(["view", str(folder)])
    err = capsys.readouterr().err
    page = folder / "view.html"
    assert not page.exists() or SECRET not in page.read_text(), f"{name}: read through a link into the page"
    assert code == 2 and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("kind", ["fifo", "folder"])
@pytest.mark.parametrize("name", ["events.jsonl", "usage.json", "view.html", "run.json"])
def test_a_special_file_is_refused_not_waited_on(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                                 kind: str) -> None:
    """A FIFO would block an open for writing (or reading) until someone opens its other end."""
    folder, model = own_paused_run(tmp_path, capsys)
    (folder / name).unlink(missing_ok=True)
    os.mkfifo(folder / name) if kind == "fifo" else (folder / name).mkdir()
    argv = ["view", str(folder)] if name == "view.html" else ["run", "-o", str(folder.parent), "-m", model,
                                                             "--resume", THREAD, "--approve"]
    proc = subprocess.run([sys.executable, "-m", "agentflow.cli.main", *argv], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2 and name in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


# -- each writer on its own (the library, whichever entry point calls it) ----------------------------------------

def _writers(folder: Path) -> dict[str, Any]:
    from agentflow.events import EventLog
    from agentflow.graph.persist.checkpoint import AgentflowSaver
    from agentflow.graph.run.history import DiffStore
    from agentflow.graph.run.ledger import RunLedger
    from agentflow.observe.view import write_view
    from agentflow.rundir import RunDir
    from agentflow.tools.journal import SqliteToolJournal

    def view() -> None:
        (folder / "report.json").unlink(missing_ok=True)
        (folder / "report.json").write_text("{}")
        write_view(folder)

    return {
        "report.json": lambda: RunDir(folder).write_json("report.json", {"a": 1}),
        "preds.jsonl": lambda: RunDir(folder).write_jsonl("preds.jsonl", [{"a": 1}]),
        "config.resolved.yaml": lambda: RunDir(folder).write_config({"a": 1}),
        "run_instance.log": lambda: RunDir(folder).write_text("run_instance.log", "log"),
        "run.json": lambda: RunLedger(folder).update_record(status="done"),
        "patch.diff": lambda: RunLedger(folder).save_diff("diff"),
        "events.jsonl": lambda: EventLog(folder / "events.jsonl").close(),
        "events.jsonl (cut)": lambda: RunDir(folder).events().close(),
        "view.html": view,
        "diffs": lambda: DiffStore(folder).put("a diff"),
        "checkpoints.db": lambda: AgentflowSaver(folder / "checkpoints.db").close(),
        "calls.db": lambda: SqliteToolJournal(folder / "calls.db").close(),
    }


WRITER_NAMES = list(_writers(Path("/nonexistent")))


@pytest.mark.parametrize("tmp_name", [False, True], ids=["file", "tmp"])
@pytest.mark.parametrize("writer", WRITER_NAMES)
def test_every_writer_refuses_a_link(tmp_path: Path, writer: str, tmp_name: bool) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    victim = tmp_path / "victim"
    victim.write_text(OUTSIDE)
    name = writer.split(" ")[0]
    if tmp_name:
        name += ".tmp"
    if writer == "events.jsonl (cut)" and not tmp_name:  # a torn last line makes the writer cut the file
        victim.write_text(OUTSIDE + "torn")
    planted = folder / name
    _link(planted, victim if writer != "diffs" else tmp_path)
    before = victim.read_text()
    try:
        _writers(folder)[writer]()
        refused = False
    except UserError as exc:
        refused = True
        assert name in str(exc), exc
    assert victim.read_text() == before and planted.is_symlink(), f"{writer}: written through {name}"
    assert refused or tmp_name, f"{writer}: a link at {name} was not refused"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "victim"], "written outside the run folder"


# -- checkpoints name types, not modules --------------------------------------------------------------------------

NOT_ALLOWED = [
    ("agentflow.sandbox.agent", "Request"),  # its import starts a stdin request loop
    ("agentflow.repair.outcome", "Candidate"),  # a real agentflow data class the workflow does not declare
    ("agentflow.config", "StrictConfig"),
    ("agentflow.budget", "Budget"),
    ("agentflow", "Evil"),
    ("agentflow.graph.run.outcome", "NodeErrorX"),
]


@pytest.mark.parametrize(("module", "name"), NOT_ALLOWED, ids=[f"{m}.{n}" for m, n in NOT_ALLOWED])
def test_a_checkpoint_naming_an_agentflow_module_is_refused_without_importing_it(
    tmp_path: Path, module: str, name: str
) -> None:
    """In a fresh interpreter: after the refusal, the module named has not been imported."""
    script = f"""
import sys, ormsgpack
from agentflow.errors import UserError
from agentflow.graph.persist.serde import StrictSerde
payload = ormsgpack.packb(ormsgpack.Ext(5, ormsgpack.packb([{module!r}, {name!r}, {{"x": 1}}])))
try:
    StrictSerde().loads_typed(("msgpack", payload))
except UserError as exc:
    print("refused:", exc)
print("imported:", {module!r} in sys.modules and {module!r} != "agentflow")
"""
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60,
                          input="", check=False, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert f"refused: refusing to load {module}.{name}" in proc.stdout or f"{module}.{name}" in proc.stdout, (
        proc.stdout + proc.stderr)
    assert "imported: False" in proc.stdout, proc.stdout + proc.stderr


def test_the_allowed_agentflow_types_round_trip() -> None:
    from agentflow.budget import BudgetUsage
    from agentflow.graph.persist.serde import AGENTFLOW_TYPES, StrictSerde
    from agentflow.graph.run.outcome import NodeError

    assert {("agentflow.graph.run.outcome", "NodeError"), ("agentflow.budget", "BudgetUsage")} <= AGENTFLOW_TYPES
    serde = StrictSerde()
    for value in (NodeError(node="n", reason="error", error="e"), BudgetUsage(tokens=3)):
        assert serde.loads_typed(serde.dumps_typed(value)) == value


# -- a benchmark's folder: its config.resolved.yaml is what `bench --resume` goes on with -------------------------

@pytest.mark.parametrize("how", HOWS)
def test_bench_resume_of_a_folder_from_elsewhere_uses_none_of_its_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, recorder: Recorder,
    how: str,
) -> None:
    from agentflow.rundir import RunDir
    from agentflow.runrecord import YAML_MAC
    from tests.swe_fixtures import TASKS_FILE

    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-users-own-key-0123456789")
    folder = tmp_path / "bench"
    RunDir.create(folder).write_config({"model": "replay:none.json", "backend": "docker"})
    text = (folder / "config.resolved.yaml").read_text()
    assert text.startswith(YAML_MAC)
    first, _, _ = text.partition("\n")
    forged = f"model: openai-compatible:{recorder.url}#m\nbackend: local\nfeedback: task\n"
    if how == "unsigned":
        text = forged
    elif how == "another key":
        text = YAML_MAC + "hmac-sha256:" + "0" * 64 + "\n" + forged
    else:
        text = first + "\n" + forged
    (folder / "config.resolved.yaml").write_text(text)
    code = run(["bench", str(TASKS_FILE), "-i", "inikit__inikit-1", "--resume", "-o", str(folder)])
    err = capsys.readouterr().err
    assert recorder.requests == [], "the folder's model URL was called"
    assert not (folder / "instances").exists(), "a task ran"
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "config.resolved.yaml" in err and "give them on the command line" in err, err


@pytest.mark.parametrize("how", HOWS)
def test_a_folder_from_elsewhere_claiming_the_users_thread_does_not_shadow_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], recorder: Recorder, how: str
) -> None:
    """Threads are found by the thread id run.json names: a copied folder naming the same thread (and sorting
    first) is passed over for the user's own record."""
    folder, _ = own_paused_run(tmp_path, capsys)
    copy = folder.parent / "a-copied-run"
    shutil.copytree(folder, copy)
    forge(copy, Elsewhere(tmp_path / "elsewhere", recorder), how, ("workflow", "model", "sandbox"))
    assert run(["run", "-o", str(folder.parent), "--history", THREAD, "--json"]) == 0, capsys.readouterr().err
    assert recorder.requests == []
