"""AgentflowSaver on real SQLite files: round trip, pending writes, compactness, retention + GC, redaction."""

from __future__ import annotations

import copy
import operator
import random
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from agentflow.graph.persist.checkpoint import AgentflowSaver, newest_per_thread


class LoopState(TypedDict, total=False):
    count: int
    log: Annotated[list, operator.add]
    note: str


def loop_graph(checkpointer: Any, records: list[str]) -> Any:
    from langgraph.graph import END, START, StateGraph

    def step(state: LoopState) -> dict[str, Any]:
        n = state.get("count", 0)
        return {"count": n + 1, "log": [records[n]]}

    g = StateGraph(LoopState)
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: END if s["count"] >= len(records) else "step")
    return g.compile(checkpointer=checkpointer)


def random_records(n: int, size: int = 2048) -> list[str]:
    rng = random.Random(1)
    vocab = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(3, 8))) for _ in range(500)]
    return [" ".join(rng.choice(vocab) for _ in range(size // 6))[:size] for _ in range(n)]


def config(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}, "recursion_limit": 500}


def test_round_trip_through_a_new_saver(tmp_path: Path) -> None:
    records = random_records(12)
    path = tmp_path / "cp.db"
    with AgentflowSaver(path, keep_last=None) as saver:
        final = loop_graph(saver, records).invoke({"count": 0}, config(), durability="sync")
    assert final["log"] == records
    with AgentflowSaver(path, keep_last=None) as saver:  # a fresh process would see the same
        latest = saver.get_tuple(config())
        assert latest is not None
        assert latest.checkpoint["channel_values"]["log"] == records
        assert latest.checkpoint["channel_values"]["count"] == 12
        history = list(saver.list(config()))
        assert len(history) == 14  # input + 13 loop checkpoints (start, 12 steps)
        assert [h.config["configurable"]["checkpoint_id"] for h in history] == sorted(
            (h.config["configurable"]["checkpoint_id"] for h in history), reverse=True
        )
        parent = saver.get_tuple(latest.parent_config)
        assert parent is not None and parent.checkpoint["channel_values"]["log"] == records[:11]
        assert list(saver.list(config(), limit=2))[1].config == history[1].config
        assert [h.metadata["step"] for h in saver.list(config(), filter={"step": 3})] == [3]
        graph = loop_graph(saver, records)
        assert graph.get_state(config()).values["count"] == 12


def test_pending_writes_round_trip(tmp_path: Path) -> None:
    with AgentflowSaver(tmp_path / "w.db") as saver:
        cfg = {"configurable": {"thread_id": "w", "checkpoint_ns": ""}}
        checkpoint = {
            "v": 4,
            "id": "1",
            "ts": "now",
            "channel_values": {"a": 1},
            "channel_versions": {"a": "1"},
            "versions_seen": {},
            "updated_channels": None,
        }
        stored = saver.put(cfg, checkpoint, {"source": "input", "step": -1}, {"a": "1"})
        saver.put_writes(stored, [("a", 2), ("b", "x")], task_id="task-b", task_path="~b")
        saver.put_writes(stored, [("a", 3)], task_id="task-a", task_path="~a")
        saver.put_writes(stored, [("a", 99)], task_id="task-a", task_path="~a")  # duplicate: first one wins
        tup = saver.get_tuple(cfg)
    assert tup is not None
    assert tup.pending_writes == [("task-a", "a", 3), ("task-b", "a", 2), ("task-b", "b", "x")]
    assert tup.checkpoint["channel_values"] == {"a": 1}


def test_only_changed_channels_are_written(tmp_path: Path) -> None:
    records = random_records(10)
    with AgentflowSaver(tmp_path / "c.db", keep_last=None) as saver:
        loop_graph(saver, records).invoke({"count": 0}, config(), durability="sync")
    conn = sqlite3.connect(tmp_path / "c.db")
    versions = dict(conn.execute("SELECT channel, count(*) FROM versions GROUP BY channel").fetchall())
    checkpoints = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
    log_items = conn.execute("SELECT count(*) FROM blobs").fetchone()[0]
    conn.close()
    assert versions["log"] == 10  # one per step, never a copy for an unchanged channel
    assert checkpoints == 12
    assert log_items < 40  # each record stored once as a blob, not once per checkpoint


def test_storage_is_compact_next_to_sqlitesaver(tmp_path: Path) -> None:
    pytest.importorskip("langgraph.checkpoint.sqlite")
    from langgraph.checkpoint.sqlite import SqliteSaver

    records = random_records(60, size=4096)
    payload = sum(len(r) for r in records)
    conn = sqlite3.connect(tmp_path / "lg.db", check_same_thread=False)
    loop_graph(SqliteSaver(conn), records).invoke({"count": 0}, config(), durability="sync")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    with AgentflowSaver(tmp_path / "af.db", keep_last=None) as saver:
        loop_graph(saver, records).invoke({"count": 0}, config(), durability="sync")
        saver.vacuum()
    lg = (tmp_path / "lg.db").stat().st_size
    af = (tmp_path / "af.db").stat().st_size
    assert af < 2 * payload  # roughly the payload, however many checkpoints refer to it
    assert af * 10 < lg  # a full snapshot per step grows quadratically


def test_retention_keeps_last_k_and_collects_blobs(tmp_path: Path) -> None:
    records = random_records(40)
    path = tmp_path / "r.db"
    with AgentflowSaver(path, keep_last=5, gc_every=4) as saver:
        final = loop_graph(saver, records).invoke({"count": 0}, config(), durability="sync")
        # a second thread shares blobs by content; retention on one thread must not break the other
        loop_graph(saver, records[:6]).invoke({"count": 0}, config("other"), durability="sync")
        saver.vacuum()
        kept = list(saver.list(config()))
        latest = saver.get_tuple(config())
        other = saver.get_tuple(config("other"))
    assert final["count"] == 40
    assert len(kept) == 5
    assert latest is not None and latest.checkpoint["channel_values"]["log"] == records
    assert other is not None and other.checkpoint["channel_values"]["log"] == records[:6]
    conn = sqlite3.connect(path)
    versions = conn.execute("SELECT count(*) FROM versions WHERE thread_id='t'").fetchone()[0]
    blobs = conn.execute("SELECT count(*) FROM blobs").fetchone()[0]
    conn.close()
    assert versions <= 3 * 5 + 1  # count, log, branch channel of the kept checkpoints (+ the input)
    assert blobs <= len(records) + 20


def test_delete_thread_removes_everything(tmp_path: Path) -> None:
    with AgentflowSaver(tmp_path / "d.db") as saver:
        loop_graph(saver, random_records(3)).invoke({"count": 0}, config(), durability="sync")
        saver.delete_thread("t")
        assert saver.get_tuple(config()) is None
        assert list(saver.list(None)) == []
    conn = sqlite3.connect(tmp_path / "d.db")
    assert conn.execute("SELECT count(*) FROM blobs").fetchone()[0] == 0
    conn.close()


def test_secrets_never_reach_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-abcdefghijklmnop1234"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    records = [f"calling with key {secret}", "plain"]
    with AgentflowSaver(tmp_path / "s.db", level=1) as saver:
        loop_graph(saver, records).invoke({"count": 0}, config(), durability="sync")
        restored = saver.get_tuple(config())
    assert restored is not None and restored.checkpoint["channel_values"]["log"][0] == "calling with key ***"
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("s.db*"))
    assert secret.encode() not in raw


async def test_async_interface(tmp_path: Path) -> None:
    records = random_records(4)
    with AgentflowSaver(tmp_path / "a.db") as saver:
        final = await loop_graph(saver, records).ainvoke({"count": 0}, config())
        tup = await saver.aget_tuple(config())
        listed = [t async for t in saver.alist(config(), limit=3)]
        await saver.adelete_thread("t")
        gone = await saver.aget_tuple(config())
    assert final["count"] == 4 and tup is not None and len(listed) == 3 and gone is None


def test_fork_from_an_older_checkpoint_keeps_both_branches(tmp_path: Path) -> None:
    records = random_records(4)
    with AgentflowSaver(tmp_path / "f.db", keep_last=None) as saver:
        graph = loop_graph(saver, records)
        graph.invoke({"count": 0}, config(), durability="sync")
        history = list(graph.get_state_history(config()))
        old = next(h for h in history if h.values.get("count") == 2)
        forked = graph.update_state(old.config, {"log": ["forked"]})
        fork_state = graph.get_state(forked)
        # the fork's new channel versions must not overwrite what later checkpoints of the original branch hold
        originals = {}
        for h in history:  # re-read the original branch after the fork was written
            values = graph.get_state(h.config).values
            originals[values.get("count")] = values.get("log")
    assert fork_state.values["log"] == [*records[:2], "forked"]
    for count in (3, 4):
        assert originals[count] == records[:count]


def test_prune_keeps_latest(tmp_path: Path) -> None:
    records = random_records(6)
    with AgentflowSaver(tmp_path / "p.db", keep_last=None) as saver:
        loop_graph(saver, records).invoke({"count": 0}, config(), durability="sync")
        saver.prune(["t"])
        left = list(saver.list(config()))
    assert len(left) == 1 and left[0].checkpoint["channel_values"]["log"] == records


def test_task_writes_ride_with_the_checkpoint_but_interrupts_commit_at_once(tmp_path: Path) -> None:
    path = tmp_path / "b.db"

    def rows() -> list[str]:
        conn = sqlite3.connect(path)  # a second connection sees only committed data
        out = [r[0] for r in conn.execute("SELECT channel FROM writes ORDER BY channel")]
        conn.close()
        return out

    saver = AgentflowSaver(path)
    cfg = {"configurable": {"thread_id": "b", "checkpoint_ns": ""}}
    checkpoint = {
        "v": 4,
        "id": "1",
        "ts": "now",
        "channel_values": {},
        "channel_versions": {},
        "versions_seen": {},
        "updated_channels": None,
    }
    stored = saver.put(cfg, checkpoint, {"source": "input", "step": -1}, {})
    saver.put_writes(stored, [("a", 1)], task_id="t1")
    assert rows() == []  # buffered until the super-step's checkpoint (or a read, flush, close)
    saver.put_writes(stored, [("__interrupt__", {"ask": "ok?"})], task_id="t2")
    assert rows() == ["__interrupt__", "a"]  # an interrupt commits at once, with what was buffered
    saver.put_writes(stored, [("b", 2)], task_id="t3")
    saver.close()
    assert rows() == ["__interrupt__", "a", "b"]


class NoteState(TypedDict, total=False):
    count: int
    note: str


def test_a_large_write_and_the_channel_value_it_becomes_share_one_blob(tmp_path: Path) -> None:
    from langgraph.graph import END, START, StateGraph

    note = " ".join(random_records(1, size=3000))

    def write_note(state: NoteState) -> dict[str, Any]:
        return {"note": note, "count": 1}

    g = StateGraph(NoteState)
    g.add_node("write_note", write_note)
    g.add_edge(START, "write_note")
    g.add_edge("write_note", END)
    path = tmp_path / "n.db"
    with AgentflowSaver(path, keep_last=None) as saver:
        graph = g.compile(checkpointer=saver)
        graph.invoke({"count": 0}, config(), durability="sync")
        history = list(saver.list(config()))
        # the checkpoint the node ran from holds its writes; the next one holds the reduced value
        ran_from = next(h for h in history if any(w[1] == "note" for w in h.pending_writes))
        assert [w[2] for w in ran_from.pending_writes if w[1] == "note"] == [note]
        assert history[0].checkpoint["channel_values"]["note"] == note
    conn = sqlite3.connect(path)
    write_ref = conn.execute("SELECT value FROM writes WHERE channel = 'note'").fetchone()[0]
    value_ref = conn.execute("SELECT ref FROM versions WHERE channel = 'note'").fetchone()[0]
    blobs = conn.execute("SELECT count(*) FROM blobs").fetchone()[0]
    conn.close()
    assert write_ref == value_ref and blobs == 1


def test_a_file_of_the_previous_layout_still_loads(tmp_path: Path) -> None:
    import zstandard

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)  # the previous `writes` table: rowid, values inline and zstd-compressed
    conn.execute(
        "CREATE TABLE writes (thread_id TEXT NOT NULL, ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL, "
        "task_id TEXT NOT NULL, idx INTEGER NOT NULL, channel TEXT NOT NULL, task_path TEXT NOT NULL, "
        "kind INTEGER NOT NULL, type TEXT, codec INTEGER, value BLOB, "
        "PRIMARY KEY (thread_id, ns, checkpoint_id, task_id, idx))"
    )
    conn.commit()
    conn.close()
    records = random_records(3)
    with AgentflowSaver(path, keep_last=None) as saver:
        loop_graph(saver, records).invoke({"count": 0}, config(), durability="sync")
        latest = saver.get_tuple(config())
        assert latest is not None
        type_, data = saver.serde.dumps_typed("x" * 500)
        checkpoint_id = latest.config["configurable"]["checkpoint_id"]
        saver._conn.execute(  # kind 3 (inline), codec 1 (zstd)
            "INSERT INTO writes VALUES ('t', '', ?, 'old-task', 0, 'note', '', 3, ?, 1, ?)",
            (checkpoint_id, type_, zstandard.ZstdCompressor().compress(data)),
        )
    with AgentflowSaver(path, keep_last=None) as saver:
        latest = saver.get_tuple(config())
    assert latest is not None and latest.checkpoint["channel_values"]["log"] == records
    assert latest.pending_writes == [("old-task", "note", "x" * 500)]


def test_one_transaction_per_super_step(tmp_path: Path) -> None:
    statements: list[str] = []
    records = random_records(5)
    with AgentflowSaver(tmp_path / "tx.db", keep_last=None) as saver:
        saver._conn.set_trace_callback(statements.append)
        loop_graph(saver, records).invoke({"count": 0}, config(), durability="sync")
        saver._conn.set_trace_callback(None)
        checkpoints = len(list(saver.list(config())))
    assert checkpoints == 7  # input, start, 5 steps
    # task writes ride with their step's checkpoint; the read at the start commits nothing
    assert sum(s.startswith("BEGIN") for s in statements) == checkpoints


def _join(a: str | None, b: str) -> str:
    return f"{a or ''}|{b}"


class JoinState(TypedDict, total=False):
    text: Annotated[str, _join]


def test_garbage_collection_keeps_blobs_only_a_pending_write_refers_to(tmp_path: Path) -> None:
    from langgraph.graph import END, START, StateGraph

    big = " ".join(random_records(1, size=2000))

    def write(state: JoinState) -> dict[str, Any]:
        return {"text": big}  # the reducer stores "|" + big: the write's own value is in no channel

    g = StateGraph(JoinState)
    g.add_node("write", write)
    g.add_edge(START, "write")
    g.add_edge("write", END)
    with AgentflowSaver(tmp_path / "gc.db", keep_last=None) as saver:
        g.compile(checkpointer=saver).invoke({"text": ""}, config(), durability="sync")
        saver.vacuum()  # sweeps every blob nothing refers to
        written = [w[2] for h in saver.list(config()) for w in h.pending_writes if w[1] == "text" and w[2]]
        latest = saver.get_tuple(config())
    assert written == [big]
    assert latest is not None and latest.checkpoint["channel_values"]["text"].endswith(f"|{big}")


def _put(saver: Any, thread: str, ns: str, checkpoint: Any) -> None:
    versions = dict(checkpoint["channel_versions"])
    saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ns}}, copy.deepcopy(checkpoint), {}, versions)


def _newest(saved: Sequence[Any]) -> list[tuple[str, str, int]]:
    return [(t.config["configurable"]["thread_id"], t.config["configurable"]["checkpoint_id"],
             t.checkpoint["channel_values"]["step"]) for t in saved]


async def test_the_newest_checkpoint_of_each_thread_is_read_and_only_those(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search's branches, each a thread: many checkpoints interleaved over them. The saver's query gives each
    root thread's newest (not a subgraph namespace's, even a newer one) and reads back no other checkpoint; the
    walk any LangGraph saver allows (here the in-memory one, fed the same checkpoints) gives the same."""
    rng = random.Random(5)
    threads = ["repair", "repair~search~b0", "repair~search~b1", "repair~search~b0~b2", "repair~search~b1~b3"]
    memory = InMemorySaver()
    expected: dict[str, int] = {}
    with AgentflowSaver(tmp_path / "cp.db", keep_last=None) as saver:
        for step in range(60):
            thread = rng.choice(threads)
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"step": step, "log": random_records(2, size=300)}
            checkpoint["channel_versions"] = {"step": saver.get_next_version(None),
                                              "log": saver.get_next_version(None)}
            _put(saver, thread, "", checkpoint)
            _put(memory, thread, "", checkpoint)
            expected[thread] = step
        inner = empty_checkpoint()
        inner["channel_values"], inner["channel_versions"] = {"step": 99}, {"step": saver.get_next_version(None)}
        _put(saver, "repair", "inner:1", inner)
        _put(memory, "repair", "inner:1", inner)
        assert len(list(saver.list(None))) == 61

        heads = 0
        load_head = saver._load_head

        def counted(type_codec: str, packed: bytes) -> Any:
            nonlocal heads
            heads += 1
            return load_head(type_codec, packed)

        monkeypatch.setattr(saver, "_load_head", counted)
        newest = await newest_per_thread(saver)
        assert heads == len(expected) == len(threads)
    assert {thread: step for thread, _, step in _newest(newest)} == expected
    ids = [checkpoint_id for _, checkpoint_id, _ in _newest(newest)]
    assert ids == sorted(ids, reverse=True)
    assert all(t.checkpoint["channel_values"]["log"] for t in newest)
    assert _newest(await newest_per_thread(memory)) == _newest(newest)
