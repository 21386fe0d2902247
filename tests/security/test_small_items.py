"""Item 7: the smaller holes, each with the attack or the mistake that showed it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from agentflow.cli.main import run
from agentflow.errors import UserError
from agentflow.sandbox import SandboxPool, open_sandbox
from agentflow.sandbox.config import SandboxConfig
from agentflow.secrets import register_secret

from .conftest import TASKS_FILE, read_jsonl, write_jsonl

STORE = "/var/lib/agentflow/store/objects"


@pytest.mark.docker
async def test_a_pool_member_cannot_rewrite_another_members_snapshot(docker_image: str) -> None:
    async with SandboxPool(3, SandboxConfig(image=docker_image), backend="docker") as pool:
        a, b, c = await pool.acquire(), await pool.acquire(), await pool.acquire()
        await a.write_file("code.py", "print('original')\n")
        sid = await a.snapshot()
        await b.restore(sid)  # copied over as a pack
        assert await b.read_file("code.py") == "print('original')\n"
        # b's store is rewritten, every object of it (no command can reach the store any more,
        # test_branch_scratch.py; this is the store's own identity, as if its snapshot operations were hostile)
        evil = (
            f"find {STORE} -type f -exec sh -c 'chmod u+w \"$1\"; printf junk > \"$1\"' _ {{}} \\; ; "
            "ls /var/lib/agentflow/store"
        )
        await b._exec(evil, store=True)
        await a.restore(sid)
        assert await a.read_file("code.py") == "print('original')\n"
        await c.restore(sid)
        assert await c.read_file("code.py") == "print('original')\n"


@pytest.mark.docker
async def test_a_reset_sandbox_leaves_nothing_to_its_next_user(docker_image: str) -> None:
    async with SandboxPool(1, SandboxConfig(image=docker_image), backend="docker") as pool:
        sb = await pool.acquire()
        await sb.exec("echo left > /dev/shm/note; echo left > /run/agentflow/note; echo left > /tmp/note; echo x > w")
        await pool.release(sb)
        again = await pool.acquire()
        assert again is sb
        res = await again.exec("ls -A /dev/shm /run/agentflow /tmp .")
        assert "note" not in res.stdout and "\nw\n" not in res.stdout, res.stdout


@pytest.mark.docker
async def test_a_full_workspace_does_not_starve_later_commands(docker_image: str) -> None:
    cfg = SandboxConfig(image=docker_image, memory_mb=256, workspace_size_mb=256, tmp_size_mb=16)
    async with open_sandbox("docker", cfg) as sb:
        fill = await sb.exec("dd if=/dev/zero of=big bs=1M count=250 2>&1; sync")
        assert fill.limit_hit != "memory", fill
        res = await sb.exec("python3 -c 'x = bytearray(150 * 1024 * 1024); print(len(x))'")
        assert res.ok and res.limit_hit is None, res


@pytest.mark.docker
async def test_an_oom_kill_inside_a_pipeline_that_exits_0_is_reported(docker_image: str) -> None:
    cfg = SandboxConfig(image=docker_image, memory_mb=128, workspace_size_mb=16, tmp_size_mb=8)
    async with open_sandbox("docker", cfg) as sb:
        res = await sb.exec("python3 -c 'x = bytearray(1024 ** 3)' | true")
        assert res.exit_code == 0
        assert res.limit_hit == "memory", res


def test_a_repo_field_is_never_an_option_to_git_clone(tmp_path: Path) -> None:
    from agentflow.swe.tasks import SWETask
    from agentflow.swe.workspace import host_repo

    marker = tmp_path / "pwned"
    task = SWETask(
        instance_id="t", repo=f"--upload-pack=touch {marker};false x.git", base_commit="abcdef0", problem_statement="p",
        FAIL_TO_PASS=[],
    )
    with pytest.raises(UserError):
        host_repo(task, tmp_path / "cache")
    assert not marker.exists()


def test_a_base_commit_is_never_an_option() -> None:
    from pydantic import ValidationError

    from agentflow.swe.tasks import SWETask

    with pytest.raises(ValidationError):
        SWETask(instance_id="t", repo="r", base_commit="--output=/tmp/x", problem_statement="p", FAIL_TO_PASS=[])


async def test_run_instance_log_is_redacted(tmp_path: Path) -> None:
    from agentflow.swe.evaluate import EvalConfig, evaluate_predictions
    from agentflow.swe.tasks import Prediction, load_tasks

    secret = "hunter2-very-secret-value"
    register_secret(secret)
    task = load_tasks(TASKS_FILE)[0]
    task = task.model_copy(update={"test_cmd": f"echo postgresql://app:{secret}@db/x && python3 -m pytest -rA"})
    gold = next(p for p in read_jsonl(TASKS_FILE.parent / "gold.jsonl") if p["instance_id"] == task.instance_id)
    cfg = EvalConfig.model_validate({"backend": "local", "rerun_failed": False})
    await evaluate_predictions([task], [Prediction(**gold)], cfg, out_dir=tmp_path)
    log = next(tmp_path.rglob("run_instance.log")).read_text()
    assert "postgresql://app:***@db/x" in log
    assert secret not in log


def test_deeply_nested_yaml_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wf = tmp_path / "deep.yaml"
    wf.write_text("a: " + "[" * 20000 + "]" * 20000 + "\n")
    assert run(["graph", "validate", str(wf)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nested too deeply" in err


@pytest.mark.parametrize("value", ["0", "-3"])
def test_keep_last_below_one_is_refused(value: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    os.chdir(tmp_path)
    assert run(["run", "demo", "-c", f"keep_last={value}", "--input", "{}"]) == 2
    assert "keep_last" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("checkpoints.db"))


def test_eval_fails_when_the_tasks_file_names_a_missing_repository(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = read_jsonl(TASKS_FILE)[0]
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [{**base, "repo": "no/such/dir"}])
    gold = next(p for p in read_jsonl(TASKS_FILE.parent / "gold.jsonl") if p["instance_id"] == base["instance_id"])
    preds = write_jsonl(tmp_path / "preds.jsonl", [gold])
    assert run(["eval", str(preds), "--tasks", str(tasks), "--sandbox", "local", "-o", str(tmp_path / "o")]) == 2
    assert "no/such/dir" in capsys.readouterr().err


@pytest.mark.docker
async def test_prune_removes_only_orphans_unless_all(docker_image: str) -> None:
    from agentflow.sandbox.docker import LABEL, docker_client, prune

    client = docker_client()
    async with open_sandbox("docker", SandboxConfig(image=docker_image)) as live:
        # made after the start (a start reaps orphans too): its owner pid does not exist
        orphan = client.containers.create(
            docker_image, ["sleep", "300"], labels={LABEL: "1", f"{LABEL}.pid": "999999999", f"{LABEL}.host": os.uname().nodename}
        )
        removed = await asyncio.to_thread(prune)
        assert orphan.name in removed
        assert live.id not in removed
        assert (await live.exec("echo alive")).stdout == "alive\n"
