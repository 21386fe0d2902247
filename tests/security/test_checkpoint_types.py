"""Item 4, run folders are code: a tampered `checkpoints.db` must not run anything on resume.

A real run of `tests/graph/approval.yaml` pauses at its approval node and leaves a real checkpoints.db. The
test rewrites every stored msgpack value of the `draft` channel into LangGraph's "call module:attr with these
arguments" extension (os.system, subprocess.run), then resumes through the Python API and through
`agentflow run --resume`: the command must not run (its marker file must not exist), and the resume fails
with one line naming the refused type.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, TypedDict

import ormsgpack
import pytest

from agentflow.cli.main import run
from agentflow.errors import UserError
from agentflow.graph.define.loader import load_workflow
from agentflow.graph.persist.checkpoint import AgentflowSaver
from agentflow.graph.persist.serde import RefusedType
from agentflow.graph.run.runner import WorkflowRunner

APPROVAL = str(Path(__file__).parents[1] / "graph" / "approval.yaml")
REPO = Path(__file__).resolve().parents[2]

# LangGraph's msgpack extension codes (langgraph.checkpoint.serde.jsonplus)
_CALL_POS_ARGS, _CALL_KW_ARGS, _PYDANTIC_V2 = 1, 2, 5


def _call(code: int, module: str, name: str, args: object) -> bytes:
    return ormsgpack.packb(ormsgpack.Ext(code, ormsgpack.packb([module, name, args])))


def payloads(marker: Path) -> list[bytes]:
    """Constructor calls that each create `marker` when a permissive deserializer revives them."""
    shell = f"touch {shlex.quote(str(marker))}"
    return [
        _call(_CALL_POS_ARGS, "os", "system", [shell]),
        _call(_CALL_KW_ARGS, "subprocess", "run", {"args": ["touch", str(marker)]}),
        # a constructor nested in an allowed-looking container (a list value)
        ormsgpack.packb(["ok", ormsgpack.Ext(_CALL_POS_ARGS, ormsgpack.packb(["os", "system", [shell]]))]),
    ]


def paused_run(runs: Path, thread: str) -> Path:
    """A real run paused at the approval node; returns its checkpoints.db."""
    assert run(["run", APPROVAL, "-o", str(runs), "--thread-id", thread, "-i", '{"topic": "cats"}']) == 0
    (db,) = runs.glob("*/checkpoints.db")
    return db


def tamper(db: Path, payload: bytes, channel: str = "draft") -> int:
    """Replace every stored value of `channel` (inline or blob) with `payload`; returns how many."""
    con = sqlite3.connect(db)
    n = 0
    with con:
        rows = con.execute("SELECT rowid, kind, ref FROM versions WHERE channel = ?", (channel,)).fetchall()
        for rowid, kind, ref in rows:
            if kind == 3:  # inline: "type\0data"
                con.execute("UPDATE versions SET ref = ? WHERE rowid = ?", (b"msgpack\0" + payload, rowid))
            elif kind == 1:
                con.execute("UPDATE blobs SET type='msgpack', codec=0, data=? WHERE hash = ?", (payload, ref))
            n += 1
    con.close()
    return n


@pytest.mark.parametrize("which", [0, 1, 2], ids=["os.system", "subprocess.run", "nested"])
def test_tampered_checkpoint_does_not_run_code_on_cli_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], which: int
) -> None:
    marker = tmp_path / "pwned"
    db = paused_run(tmp_path / "runs", "t1")
    assert tamper(db, payloads(marker)[which]) >= 1
    capsys.readouterr()
    code = run(["run", APPROVAL, "-o", str(tmp_path / "runs"), "--resume", "t1", "--approve"])
    err = capsys.readouterr().err
    assert not marker.exists(), "the tampered checkpoint ran a command"
    assert code == 2, err
    said = [line for line in err.strip().splitlines() if not line.startswith("resume ")]  # after the run line
    assert "Traceback" not in err and len(said) == 1, err
    assert "checkpoint" in err and ("os.system" in err or "subprocess.run" in err), err


def test_tampered_checkpoint_cli_subprocess(tmp_path: Path) -> None:
    """The installed entry point, in a fresh process (nothing imported beforehand by the test)."""
    marker = tmp_path / "pwned"
    db = paused_run(tmp_path / "runs", "t2")
    tamper(db, payloads(marker)[0])
    proc = subprocess.run(
        [sys.executable, "-m", "agentflow.cli.main", "run", APPROVAL, "-o", str(tmp_path / "runs"),
         "--resume", "t2", "--approve"],
        cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
                       "AGENTFLOW_CONFIG_DIR": os.environ["AGENTFLOW_CONFIG_DIR"]},
        capture_output=True, text=True, check=False,
        timeout=120,
    )
    assert not marker.exists()
    assert proc.returncode == 2, proc.stderr
    said = [line for line in proc.stderr.strip().splitlines() if not line.startswith("resume ")]  # after the run line
    assert len(said) == 1 and "os.system" in proc.stderr, proc.stderr


def test_tampered_checkpoint_does_not_run_code_through_the_python_api(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    db = paused_run(tmp_path / "runs", "t3")
    tamper(db, payloads(marker)[1])

    async def resume() -> None:
        async with WorkflowRunner(load_workflow(APPROVAL), run_dir=db.parent) as runner:
            await runner.resume("t3", approve=True)

    with pytest.raises(UserError, match=r"subprocess\.run"):
        asyncio.run(resume())
    assert not marker.exists()
    # the saver on its own (LangGraph's API), as an application using it directly would
    with AgentflowSaver(db) as saver, pytest.raises(UserError, match=r"subprocess\.run"):
        saver.get_tuple({"configurable": {"thread_id": "t3"}})
    assert not marker.exists()


def test_pydantic_constructor_of_a_foreign_class_is_refused(tmp_path: Path) -> None:
    """The pydantic extension names its class too: only declared classes are built."""
    db = paused_run(tmp_path / "runs", "t4")
    tamper(db, _call(_PYDANTIC_V2, "agentflow.tests_nothing", "Evil", {"x": 1}))
    with AgentflowSaver(db) as saver, pytest.raises(UserError, match=r"agentflow\.tests_nothing\.Evil"):
        saver.get_tuple({"configurable": {"thread_id": "t4"}})


@dataclasses.dataclass
class Draft:
    """A user type the workflow's state declares: it must come back from a checkpoint as itself."""

    text: str
    words: int


@dataclasses.dataclass
class Undeclared:
    """Stored under an `Any` key: nothing declares it, so a checkpoint holding it is refused."""

    text: str


class DraftState(TypedDict, total=False):
    topic: str
    draft: Draft
    note: Any


def test_a_declared_state_type_survives_a_resume_an_undeclared_one_is_refused(tmp_path: Path) -> None:
    from agentflow.graph.define.builder import Workflow

    def write(state: DraftState) -> dict[str, Any]:
        return {"draft": Draft(f"about {state['topic']}", 2), "note": Undeclared("x") if state["topic"] == "b" else 1}

    def publish(state: DraftState) -> dict[str, Any]:
        assert isinstance(state["draft"], Draft)  # rebuilt from the checkpoint as the declared type
        return {"topic": state["draft"].text.upper()}

    wf = Workflow("drafts", state=DraftState).node("write", write).interrupt("review", "ok?").node("publish", publish)
    wf.edge("write", "review").edge("review", "publish").edge("publish", "END")

    async def leg(topic: str, run_dir: Path) -> Any:
        async with WorkflowRunner(wf.spec, run_dir=run_dir, checkpointer="sqlite") as runner:
            assert (await runner.start({"topic": topic}, thread_id="t")).status == "interrupted"
        async with WorkflowRunner(wf.spec, run_dir=run_dir, checkpointer="sqlite") as runner:  # a new process
            return await runner.resume("t", approve=True)

    assert asyncio.run(leg("a", tmp_path / "a")).state["topic"] == "ABOUT A"
    with pytest.raises(RefusedType, match=r"Undeclared"):
        asyncio.run(leg("b", tmp_path / "b"))
