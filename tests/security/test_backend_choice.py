"""Item 3: model code never runs on the host unless the user asked for the local backend by name."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from agentflow.cli.main import run
from agentflow.errors import UserError
from agentflow.sandbox import open_sandbox, resolve_backend
from agentflow.sandbox.local import LocalBackendWarning, LocalSandbox


@pytest.fixture
def no_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    import agentflow.sandbox.docker as dock

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.setattr(dock, "_client_cache", None)


def test_auto_without_docker_is_an_error_naming_the_fix(no_docker: None) -> None:
    with pytest.raises(UserError, match="--sandbox local"):
        resolve_backend("auto")


@pytest.mark.parametrize("argv", [["sandbox", "exec", "echo hi"], ["tools", "call", "bash", "-i", '{"command": "echo hi"}', "--sandbox", "auto"]])
def test_cli_commands_do_not_fall_back_to_the_host(no_docker: None, argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    argv = [a.replace("echo hi", f"touch {marker}") for a in argv]
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--sandbox local" in err
    assert not marker.exists()


def test_eval_and_bench_without_docker_fail_once_before_any_task(no_docker: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.swe_fixtures import GOLD_FILE, TASKS_FILE

    assert run(["eval", str(GOLD_FILE), "--tasks", str(TASKS_FILE), "-o", str(tmp_path / "e")]) == 2
    assert "--sandbox local" in capsys.readouterr().err
    assert not (tmp_path / "e" / "report.json").exists()


async def test_local_backend_warns_scrubs_secrets_and_records_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentflow.events import EventLog

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-value-123")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-value-456")
    monkeypatch.setenv("SOME_SETTING", "visible-or-not")
    events = EventLog()
    with pytest.warns(LocalBackendWarning, match="not a security boundary"):
        async with open_sandbox("local", events=events) as sb:
            env = (await sb.exec("env")).stdout
    assert "sk-test-secret-value-123" not in env and "aws-secret-value-456" not in env
    assert "SOME_SETTING" not in env  # only a short allow-list of host variables gets through
    assert "PATH=" in env
    start = [e for e in events.events if e.kind == "sandbox.start"]
    assert start and start[0].data["backend"] == "local"


async def test_local_close_kills_background_jobs() -> None:
    with pytest.warns(LocalBackendWarning):
        sb = await LocalSandbox.start()
    res = await sb.exec("nohup sleep 300 >/dev/null 2>&1 & echo $!")
    pid = int(res.stdout.strip())
    os.kill(pid, 0)  # running
    await sb.close()
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        if Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z":
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail(f"background job {pid} outlived its local sandbox")


def test_local_temp_dir_of_a_killed_host_is_removed_at_the_next_start(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONWARNINGS": "ignore"}
    code = (
        "import asyncio, sys\n"
        "from agentflow.sandbox.local import LocalSandbox\n"
        "async def main():\n"
        "    sb = await LocalSandbox.start()\n"
        "    await sb.exec('nohup sleep 300 >/dev/null 2>&1 &')\n"
        "    print(sb.root, flush=True)\n"
        "    await asyncio.sleep(300)\n"
        "asyncio.run(main())\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    root = Path(proc.stdout.readline().strip())
    assert root.is_dir()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # the agent saw its host go and took its commands with it
    deadline = time.time() + 10
    while time.time() < deadline and _sleepers(root):
        time.sleep(0.2)
    assert not _sleepers(root)
    tempfile.tempdir = None
    old = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(tmp_path)
    try:
        from agentflow.sandbox.local import reap_local_orphans

        assert str(root) in reap_local_orphans()
    finally:
        tempfile.tempdir = None
        if old is None:
            os.environ.pop("TMPDIR")
        else:
            os.environ["TMPDIR"] = old
    assert not root.exists()


def _sleepers(root: Path) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if (p / "cwd").resolve() == root / "workspace" and b"sleep" in (p / "cmdline").read_bytes():
                    out.append(int(p.name))
            except OSError:
                continue
    return out
