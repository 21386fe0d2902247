"""Exactly-once tool effects through a real SQLite journal file."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from agentflow.budget import Budget
from agentflow.events import EventLog
from agentflow.models.base import ToolCall
from agentflow.tools import (
    SqliteToolJournal,
    ToolContext,
    ToolJournal,
    ToolRegistry,
    ToolResult,
    journal_key,
    tool,
)


def make_appender(path: Path) -> ToolRegistry:
    @tool
    def append_line(line: str) -> str:
        """Append a line to the log file (a side effect that must not repeat)."""
        with path.open("a") as fh:
            fh.write(line + "\n")
        return f"appended {line!r}; file has {len(path.read_text().splitlines())} lines"

    return ToolRegistry([append_line])


async def test_same_key_runs_once_even_with_a_fresh_journal_on_the_same_file(tmp_path: Path) -> None:
    effects = tmp_path / "effects.txt"
    db = tmp_path / "journal.db"
    registry = make_appender(effects)
    call = ToolCall(id="c1", name="append_line", arguments={"line": "hello"})
    key = journal_key("thread-1", "coder", 3, 0, call.name, call.arguments)

    with SqliteToolJournal(db) as journal:
        first = await registry.execute(call, journal=journal, key=key)
    assert first.ok and not first.replayed and effects.read_text() == "hello\n"

    budget = Budget()
    with SqliteToolJournal(db) as reopened, EventLog() as log:  # as after a crash and resume
        again = await registry.execute(
            call, ToolContext(budget=budget, events=log), journal=reopened, key=key
        )
        assert reopened.keys("thread-1:") == [key]
    assert effects.read_text() == "hello\n"
    assert again.replayed and again.ok and again.text == first.text and again.duration_s == 0
    assert budget.used.tool_calls == 0  # charged by the run that did the work
    assert log.events[0].data["replayed"] is True and log.events[0].data["key"] == key


async def test_other_keys_and_no_journal_run_again(tmp_path: Path) -> None:
    effects = tmp_path / "effects.txt"
    registry = make_appender(effects)
    call = ToolCall(id="c1", name="append_line", arguments={"line": "x"})
    with SqliteToolJournal(tmp_path / "journal.db") as journal:
        await registry.execute(call, journal=journal, key="t:n:0:0")
        await registry.execute(call, journal=journal, key="t:n:0:1")
        await registry.execute(call, journal=journal)  # no key: nothing to replay
        await registry.execute(call)
    assert effects.read_text() == "x\n" * 4


async def test_failed_results_are_journaled_too(tmp_path: Path) -> None:
    calls = []

    @tool
    def flaky(n: int) -> str:
        """Fail the first time."""
        calls.append(n)
        raise RuntimeError("disk full")

    registry = ToolRegistry([flaky])
    with SqliteToolJournal(tmp_path / "j.db") as journal:
        first = await registry.execute(
            ToolCall(id="a", name="flaky", arguments={"n": 1}), journal=journal, key="k"
        )
        second = await registry.execute(
            ToolCall(id="a", name="flaky", arguments={"n": 1}), journal=journal, key="k"
        )
    assert calls == [1]
    assert not first.ok and not second.ok and second.replayed and second.text == first.text


def test_wal_mode_first_write_wins_and_protocol(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    journal = SqliteToolJournal(db)
    assert isinstance(journal, ToolJournal)
    journal.put("k", ToolResult(text="first", data={"n": 1}))
    journal.put("k", ToolResult(text="second"))
    got = journal.get("k")
    assert got is not None and got.text == "first" and got.data == {"n": 1} and got.replayed
    assert journal.get("missing") is None
    with sqlite3.connect(db) as other:  # a second connection sees the committed row
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert other.execute("SELECT count(*) FROM tool_journal").fetchone()[0] == 1
    journal.close()
    with pytest.raises(RuntimeError, match="closed"):
        journal.get("k")


def test_prefix_queries_are_exact(tmp_path: Path) -> None:
    with SqliteToolJournal(tmp_path / "j.db") as journal:
        for key in ("T1:a", "t1:a", "t1:b", "t1_x:a", "t10:a"):
            journal.put(key, ToolResult(text=key))
        assert journal.keys("t1:") == ["t1:a", "t1:b"]
        assert journal.delete("t1:") == 2
        assert sorted(journal.keys()) == ["T1:a", "t10:a", "t1_x:a"]


def test_safe_from_several_threads(tmp_path: Path) -> None:
    journal = SqliteToolJournal(tmp_path / "j.db")
    errors: list[BaseException] = []

    def worker(w: int) -> None:
        try:
            for i in range(50):
                journal.put(f"k{i}", ToolResult(text=f"w{w}"))
                assert journal.get(f"k{i}") is not None
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(journal.keys()) == 50
    journal.close()


def test_secrets_are_redacted_in_the_journal_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "tok-journal-test-98765"
    monkeypatch.setenv("SERVICE_TOKEN", secret)
    db = tmp_path / "j.db"
    with SqliteToolJournal(db) as journal:
        journal.put("k", ToolResult(text=f"token={secret}", data={"env": secret}))
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT result FROM tool_journal").fetchone()[0]
    assert secret not in stored and "token=***" in stored


def test_journal_key_scheme() -> None:
    a = journal_key("th", "coder", 2, 1, "edit", {"path": "a.py", "text": "x"})
    assert a == journal_key("th", "coder", 2, 1, "edit", {"text": "x", "path": "a.py"})  # order-insensitive
    assert a.startswith("th:coder:2:1:edit:") and len(a.rsplit(":", 1)[1]) == 64
    assert a != journal_key("th", "coder", 2, 1, "edit", {"path": "b.py", "text": "x"})
    assert a != journal_key("th", "coder", 2, 2, "edit", {"path": "a.py", "text": "x"})


CRASHING_RUN = """
import asyncio, os, sys
from pathlib import Path
from agentflow.models.base import ToolCall
from agentflow.tools import SqliteToolJournal, ToolRegistry, journal_key, tool

effects, db, crash = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "crash"

@tool
def append_line(line: str) -> str:
    '''Append a line.'''
    with effects.open("a") as fh:
        fh.write(line + "\\n")
    return "appended"

async def main() -> None:
    registry = ToolRegistry([append_line])
    journal = SqliteToolJournal(db)
    for i, line in enumerate(["one", "two"]):
        call = ToolCall(id=str(i), name="append_line", arguments={"line": line})
        result = await registry.execute(call, journal=journal, key=journal_key("t", "n", 0, i, call.name, call.arguments))
        print(line, result.replayed, flush=True)
        if crash and i == 0:
            os._exit(9)  # dies without closing anything, like a killed worker

asyncio.run(main())
"""


def test_a_crashed_process_resumes_without_repeating_completed_calls(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = tmp_path / "run.py"
    script.write_text(CRASHING_RUN)
    effects, db = tmp_path / "effects.txt", tmp_path / "journal.db"
    args = [sys.executable, str(script), str(effects), str(db)]
    crashed = subprocess.run([*args, "crash"], check=False, capture_output=True, text=True, timeout=60)
    assert crashed.returncode == 9 and crashed.stdout.split() == ["one", "False"]
    resumed = subprocess.run([*args, "resume"], check=False, capture_output=True, text=True, timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.split() == ["one", "True", "two", "False"]
    assert effects.read_text() == "one\ntwo\n"
