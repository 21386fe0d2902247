"""A task cut by an interrupt leaves no outcome, however the cut surfaces: a Ctrl-C may reach a sandbox command
first and come back as an error of that command (its link closed) before the cancellation itself; the task
must still count as unfinished, so that `--resume` continues it instead of taking an empty outcome as done."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentflow.errors import SandboxError
from agentflow.events import EventLog, read_events
from agentflow.repair.config import load_repair_config
from agentflow.repair.run import solve
from agentflow.repair.run.progress import ProgressPrinter
from agentflow.swe import load_tasks

from .conftest import TASKS_FILE, scripted_cassette


def _run_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repair_in: Any) -> Any:
    """repair_task on the local backend with its workflow replaced by `repair_in`: its outcome."""
    monkeypatch.setattr(solve, "_repair_in", repair_in)
    cassette = scripted_cassette(tmp_path / "none.json", [])
    cfg = load_repair_config(["backend=local", f"model=replay:{cassette}"])
    task = next(t for t in load_tasks(TASKS_FILE) if t.instance_id == "inikit__inikit-1")

    async def go() -> Any:
        with EventLog(tmp_path / "events.jsonl") as events:
            return await solve.repair_task(task, cfg, events=events, inst_dir=tmp_path / "inst")

    return asyncio.run(go())


def test_an_interrupt_that_surfaces_as_a_sandbox_error_leaves_the_task_unfinished(tmp_path, monkeypatch):
    async def cut_mid_command(*_: Any) -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # what asyncio.run does on Ctrl-C
        try:
            await asyncio.sleep(1)
        except asyncio.CancelledError:
            raise SandboxError("the sandbox's link closed mid-command") from None

    with pytest.raises(asyncio.CancelledError):
        _run_task(tmp_path, monkeypatch, cut_mid_command)
    assert not (tmp_path / "inst" / "outcome.json").exists()
    # the task's end says it was interrupted, and so does the progress line (not `done: no_patch`)
    (end,) = [e for e in read_events(tmp_path / "events.jsonl") if e.kind == "repair.end"]
    assert end.data["status"] == "interrupted" and end.data["finished"] is False
    lines: list[str] = []
    printer = ProgressPrinter(lines.append)
    for event in read_events(tmp_path / "events.jsonl"):
        printer(event)
    assert any("interrupted: the task did not finish" in line for line in lines), lines
    assert not any("done:" in line for line in lines), lines


def test_a_sandbox_error_without_an_interrupt_ends_the_task_with_its_outcome(tmp_path, monkeypatch):
    async def fail(*_: Any) -> None:
        raise SandboxError("the engine went away")

    outcome = _run_task(tmp_path, monkeypatch, fail)
    assert outcome.status == "env_error" and "engine went away" in (outcome.error or "")
    assert (tmp_path / "inst" / "outcome.json").exists()
    (end,) = [e for e in read_events(tmp_path / "events.jsonl") if e.kind == "repair.end"]
    assert end.data["status"] == "env_error" and end.data["finished"] is True
