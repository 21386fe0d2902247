"""Exactly-once tool effects: a journal of completed tool calls, keyed by where in a run they happened.

`ToolRegistry.execute(call, ctx, journal=j, key=k)` returns the journaled result when `k` is already in
`j` (without running the tool) and otherwise runs the tool and records the result under `k`. A resumed
graph node that repeats its tool calls therefore replays them instead of repeating their effects.

The guarantee covers *completed* calls: a crash after a tool's effect but before its result is written
re-runs that one call on resume. Results are stored redacted, like every other persisted record.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Protocol, Self, runtime_checkable

from agentflow.runfiles import check_database
from agentflow.secrets import redact
from agentflow.tools.result import ToolResult


@runtime_checkable
class ToolJournal(Protocol):
    """Where completed tool calls are kept. Implementations must be safe to use from several threads. One
    with an `async def aput(key, result)` is recorded through it instead of `put` (the run ledger's journal
    keeps the workspace there before recording the call)."""

    def get(self, key: str) -> ToolResult | None: ...

    def put(self, key: str, result: ToolResult) -> None: ...


def args_digest(arguments: dict[str, Any]) -> str:
    """sha256 of the arguments as canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def journal_key(
    thread_id: str, node: str, step: int, call_index: int, tool: str, arguments: dict[str, Any]
) -> str:
    """The recommended key: `thread:node:step:call_index:tool:sha256(args)`.

    `step` is the node's agent-loop step and `call_index` the call's position in that step's reply, so two
    identical calls in one run get different keys, and a call whose arguments changed on resume (a model
    that is not deterministic) does not replay a result that belongs to other arguments.
    """
    return f"{thread_id}:{node}:{step}:{call_index}:{tool}:{args_digest(arguments)}"


class SqliteToolJournal:
    """A `ToolJournal` in a SQLite file (WAL mode): survives the process, shared by threads and processes."""

    def __init__(self, path: str | Path) -> None:
        self.path = check_database(path)  # SQLite would write through a link the run folder brings
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = sqlite3.connect(
            self.path, check_same_thread=False, timeout=30.0, isolation_level=None
        )
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across a process crash
        for table, value in (("tool_journal", "result TEXT NOT NULL, "), ("reply_journal", "reply TEXT NOT NULL, "),
                             ("marks", "")):
            self._conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, {value}created REAL NOT NULL)")

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError(f"tool journal {self.path} is closed")
        return self._conn

    def _sql(self, query: str, *params: Any) -> list[Any]:
        """One statement, run under the lock; its rows."""
        with self._lock:
            return self._db().execute(query, params).fetchall()

    def get(self, key: str) -> ToolResult | None:
        rows = self._sql("SELECT result FROM tool_journal WHERE key = ?", key)
        if not rows:
            return None
        result = ToolResult.model_validate_json(rows[0][0])
        result.replayed = True
        result.duration_s = 0.0
        return result

    def put(self, key: str, result: ToolResult) -> None:
        """Record `result` under `key`; the first result recorded for a key wins."""
        stored = ToolResult.model_validate(redact(result.model_dump(mode="json")))
        stored.replayed = False
        self._sql("INSERT OR IGNORE INTO tool_journal (key, result, created) VALUES (?, ?, ?)",
                  key, stored.model_dump_json(), time.time())

    def get_reply(self, key: str) -> str | None:
        """A model reply journaled under `key` (JSON text), or None. Agents journal their replies beside their
        tool calls, so a node re-run after a crash gets the replies it had instead of asking the model again."""
        rows = self._sql("SELECT reply FROM reply_journal WHERE key = ?", key)
        return str(rows[0][0]) if rows else None

    def put_reply(self, key: str, reply: str) -> None:
        """Record a model reply (JSON text, redacted here) under `key`; the first one recorded wins."""
        text = json.dumps(redact(json.loads(reply)))
        self._sql("INSERT OR IGNORE INTO reply_journal (key, reply, created) VALUES (?, ?, ?)", key, text, time.time())

    def mark(self, key: str) -> None:
        """Record that something keyed `key` completed (a search branch's step ending at a checkpoint)."""
        self._sql("INSERT OR IGNORE INTO marks (key, created) VALUES (?, ?)", key, time.time())

    def marked(self, key: str) -> bool:
        return bool(self._sql("SELECT 1 FROM marks WHERE key = ?", key))

    def keys(self, prefix: str = "") -> list[str]:
        """Journaled keys starting with `prefix` (e.g. a thread id and ':'), oldest first."""
        query = "SELECT key FROM tool_journal WHERE substr(key, 1, ?) = ? ORDER BY created, rowid"
        return [r[0] for r in self._sql(query, len(prefix), prefix)]

    def delete(self, prefix: str) -> int:
        """Forget every entry whose key starts with `prefix` (e.g. a finished thread); returns how many."""
        with self._lock:
            cur = self._db().execute(
                "DELETE FROM tool_journal WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
            )
            self._db().execute("DELETE FROM reply_journal WHERE substr(key, 1, ?) = ?", (len(prefix), prefix))
        return cur.rowcount

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
