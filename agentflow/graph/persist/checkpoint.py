"""agentflow's compact, crash-safe LangGraph checkpointer on SQLite (docs/concepts/workflows.md, "Compact
checkpoints": what it stores, retention, durability).

Storage layout (one SQLite file, WAL, one transaction per super-step):

- `blobs(hash, type, codec, data)`: content-addressed values (sha256 of the serialized value), zstd-compressed
  when that helps.
- `versions(thread_id, ns, channel, version, kind, ref)`: what a channel version holds, written only when the
  version changed. A list value is stored item by item (`ref`: the concatenated item hashes); a value that
  serializes to at most 128 bytes is kept inline in the row.
- `checkpoints(...)`: the checkpoint without its channel values, plus metadata.
- `writes(...)`: pending writes of tasks (values over 128 bytes as blobs). Ordinary task writes are committed
  with the next checkpoint (`batch_writes=True`): a crash inside a super-step re-runs its tasks, which
  LangGraph's at-least-once semantics allow. Interrupt, error and resume writes are committed at once.
- `pins(thread_id, ns, checkpoint_id)`: checkpoints retention keeps beside the last `keep_last`: a fork's
  first checkpoint and its source, and those `prune(keep=...)` is given.

Every serialized value passes through `serde_redact.redact_serialized` before it is stored.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import random
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Self

import zstandard
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)

from agentflow.errors import UserError
from agentflow.graph.persist.compression import decompress
from agentflow.graph.persist.serde import RefusedType, StrictSerde
from agentflow.graph.persist.serde_redact import redact_serialized
from agentflow.runfiles import check_database
from agentflow.secrets import Redactors, redactors

# Rowid tables on purpose: a WITHOUT ROWID b-tree keeps little of a row in-page, so KB-sized blobs, heads and
# manifests would spill into overflow pages. `writes` rows are small, so it is WITHOUT ROWID (one b-tree, no
# separate primary-key index); older files keep a rowid `writes`, which reads and writes the same.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS blobs (
    hash BLOB PRIMARY KEY, type TEXT NOT NULL, codec INTEGER NOT NULL, data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS versions (
    thread_id TEXT NOT NULL, ns TEXT NOT NULL, channel TEXT NOT NULL, version TEXT NOT NULL,
    kind INTEGER NOT NULL, ref BLOB,
    PRIMARY KEY (thread_id, ns, channel, version)
);
CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id TEXT NOT NULL, ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL, parent_id TEXT,
    type TEXT NOT NULL, checkpoint BLOB NOT NULL, mtype TEXT NOT NULL, metadata BLOB NOT NULL,
    PRIMARY KEY (thread_id, ns, checkpoint_id)
);
CREATE TABLE IF NOT EXISTS writes (
    thread_id TEXT NOT NULL, ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL, task_id TEXT NOT NULL,
    idx INTEGER NOT NULL, channel TEXT NOT NULL, task_path TEXT NOT NULL, kind INTEGER NOT NULL,
    type TEXT, codec INTEGER, value BLOB,
    PRIMARY KEY (thread_id, ns, checkpoint_id, task_id, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pins (
    thread_id TEXT NOT NULL, ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL,
    PRIMARY KEY (thread_id, ns, checkpoint_id)
) WITHOUT ROWID;
"""

_KIND_EMPTY, _KIND_BLOB, _KIND_LIST, _KIND_INLINE = 0, 1, 2, 3
_CODEC_RAW, _CODEC_ZSTD = 0, 1
_INLINE_MAX = 128  # serialized values up to this size live in the versions row itself
_MIN_COMPRESS = 96  # below this, zstd's frame header outweighs the gain
# Checkpoint heads are written every step and rarely kept long: below this size compressing one costs more
# time than its bytes are worth (docs/measurements/checkpoint-storage.md).
_HEAD_COMPRESS_MIN = 1024
_IMMUTABLE = (str, bytes, int, float)
# SQLite copies the WAL into the database file (fsyncs) in the commit that takes the WAL past this many pages:
# above SQLite's default of 1000, so those fsyncs come on fewer steps, while the WAL stays small.
_WAL_CHECKPOINT_PAGES = 4096


class AgentflowSaver(BaseCheckpointSaver[str]):
    """LangGraph checkpointer: content-addressed, zstd-compressed, changed channels only, with retention.

    `keep_last` checkpoints are kept per thread and namespace (None keeps all); garbage is collected every
    `gc_every` checkpoints. `level`: the zstd level of blobs (1 is faster than 3 on small code and text for
    hardly more bytes). Reading builds only the classes `StrictSerde` allows (plus `allowed_types` and what
    `with_allowlist` adds); any other type a stored value names is a `RefusedType` error.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        keep_last: int | None = 20,
        gc_every: int = 16,
        level: int = 1,
        batch_writes: bool = True,
        serde: Any = None,
        allowed_types: Iterable[tuple[str, ...] | type] = (),
    ) -> None:
        # Only declared types are built from a stored value (graph/persist/serde.py): a run folder is not code.
        super().__init__(serde=serde if serde is not None else StrictSerde(allowed_types))
        self.path = check_database(path)  # SQLite would write through a link the run folder brings
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if keep_last is not None and keep_last < 1:
            raise ValueError(f"keep_last must be at least 1 (or None to keep all), got {keep_last}")
        self.keep_last = keep_last
        self.gc_every = max(1, gc_every)
        self._lock = threading.RLock()
        self._redactors: Redactors | None = None  # the secrets of the put in progress (see _dumps)
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        # Every open saver holds a shared lock on the file; `prune` takes it exclusively. Another process's saver
        # trusts the blobs it has stored to stay (it does not write them again): a prune from outside while it
        # runs could take a blob it is about to refer to.
        self._users = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        fcntl.flock(self._users, fcntl.LOCK_SH)
        # auto_vacuum must be chosen before the first table exists; it lets retention shrink the file.
        self._conn.executescript(
            "PRAGMA auto_vacuum=INCREMENTAL; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
            f"PRAGMA busy_timeout=10000; PRAGMA wal_autocheckpoint={_WAL_CHECKPOINT_PAGES};" + _SCHEMA
        )
        self._cctx = zstandard.ZstdCompressor(level=level)
        self._dctx = zstandard.ZstdDecompressor()
        self._known: set[bytes] = set()  # blob hashes this process has seen stored
        self._list_cache: dict[tuple[str, str, str], tuple[list[Any], list[bytes]]] = {}
        self._puts = 0
        self.pruned = 0  # checkpoints the last `prune` removed
        self._unswept = 0  # checkpoints deleted since the last blob sweep
        self.batch_writes = batch_writes
        self._pending: list[tuple[bool, tuple[Any, ...], int, Any]] = []  # task writes awaiting their checkpoint
        self.metadata_hook: Callable[[RunnableConfig], Awaitable[dict[str, Any]]] | None = None
        """Awaited by `aput` with the checkpoint's config; the keys it returns join the checkpoint's metadata."""

    # -- encoding -------------------------------------------------------------------------------

    def _encode(self, data: bytes, threshold: int = _MIN_COMPRESS) -> tuple[int, bytes]:
        if len(data) >= threshold:
            packed = self._cctx.compress(data)
            if len(packed) < len(data):
                return _CODEC_ZSTD, packed
        return _CODEC_RAW, data

    def _decode(self, codec: int, data: bytes) -> bytes:
        return decompress(data, f"a checkpoint value in {self.path}", dctx=self._dctx) if codec == _CODEC_ZSTD else data

    def _loads(self, type_: str, data: bytes) -> Any:
        try:
            return self.serde.loads_typed((type_, data))
        except RefusedType as exc:
            raise RefusedType(exc.type_name, where=str(self.path)) from None

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> Self:
        """Also load these (module, name) types. Unlike LangGraph's savers this widens this saver in place
        (every graph sharing it reads the same file) and returns it."""
        if isinstance(self.serde, StrictSerde):
            self.serde.allow(extra_allowlist)
        return self

    def _dumps(self, value: Any) -> tuple[str, bytes]:
        """Every value stored goes through here: serialized, then its secrets masked (serde_redact)."""
        type_, data = self.serde.dumps_typed(value)
        return type_, redact_serialized(type_, data, self._redactors)

    def _store_serialized(self, cur: sqlite3.Cursor, type_: str, data: bytes) -> bytes:
        digest = hashlib.sha256(type_.encode() + b"\0" + data).digest()
        if digest not in self._known:
            codec, packed = self._encode(data)
            cur.execute("INSERT OR IGNORE INTO blobs VALUES (?, ?, ?, ?)", (digest, type_, codec, packed))
            self._known.add(digest)
        return digest

    def _store_list(self, cur: sqlite3.Cursor, key: tuple[str, str, str], items: list[Any]) -> bytes:
        prev_items, prev_hashes = self._list_cache.get(key, ([], []))
        hashes: list[bytes] = []
        for i, item in enumerate(items):
            # Reuse the hash of an identical immutable item at the same position (append-only lists).
            if i < len(prev_items) and prev_items[i] is item and isinstance(item, _IMMUTABLE):
                digest = prev_hashes[i]
                if digest in self._known:
                    hashes.append(digest)
                    continue
            hashes.append(self._store_serialized(cur, *self._dumps(item)))
        self._list_cache[key] = (list(items), hashes)
        return b"".join(hashes)

    def _load_blob(self, cur: sqlite3.Cursor, digest: bytes) -> Any:
        row = cur.execute("SELECT type, codec, data FROM blobs WHERE hash = ?", (digest,)).fetchone()
        if row is None:
            raise KeyError(f"checkpoint blob {digest.hex()} is missing")
        return self._loads(row[0], self._decode(row[1], row[2]))

    def _load_ref(self, cur: sqlite3.Cursor, kind: int, ref: bytes) -> Any:
        """A value stored as a blob, or as a list of blobs (`ref`: their concatenated hashes)."""
        if kind == _KIND_LIST:
            return [self._load_blob(cur, ref[i : i + 32]) for i in range(0, len(ref), 32)]
        return self._load_blob(cur, ref)

    def _load_head(self, type_codec: str, packed: bytes) -> Any:
        """A checkpoint without its channel values (its type is stored as `type:codec`)."""
        head_type, _, codec = type_codec.rpartition(":")
        return self._loads(head_type, self._decode(int(codec), packed))

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        """One write transaction (the caller holds the lock); a failure rolls it back and forgets what it stored."""
        cur = self._conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            yield cur
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            self._known.clear()
            self._list_cache.clear()
            raise

    def _load_values(
        self, cur: sqlite3.Cursor, thread_id: str, ns: str, versions: ChannelVersions
    ) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for channel, version in versions.items():
            row = cur.execute(
                "SELECT kind, ref FROM versions WHERE thread_id=? AND ns=? AND channel=? AND version=?",
                (thread_id, ns, channel, str(version)),
            ).fetchone()
            if row is None or row[0] == _KIND_EMPTY:
                continue
            if row[0] == _KIND_INLINE:
                type_, _, data = bytes(row[1]).partition(b"\0")
                values[channel] = self._loads(type_.decode(), data)
            else:
                values[channel] = self._load_ref(cur, *row)
        return values

    # -- sync interface -------------------------------------------------------------------------------

    def put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions
    ) -> RunnableConfig:
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), conf.get("checkpoint_ns", "")
        self._redactors = redactors()  # looked up once per put, not per value
        values = checkpoint["channel_values"]
        head = dict(checkpoint)
        del head["channel_values"]
        head_type, head_data = self._dumps(head)
        meta_type, meta_data = self._dumps(get_checkpoint_metadata(config, metadata))
        with self._lock:
            head_codec, head_packed = self._encode(head_data, _HEAD_COMPRESS_MIN)
            deleted = 0
            with self._transaction() as cur:
                self._write_pending(cur)
                rows: list[tuple[Any, ...]] = []
                for channel, version in new_versions.items():
                    if channel not in values:
                        continue  # an emptied channel: a version without a row reads as empty
                    value = values[channel]
                    if type(value) is list:
                        kind, ref = _KIND_LIST, self._store_list(cur, (thread_id, ns, channel), value)
                    else:
                        type_, data = self._dumps(value)
                        if len(data) <= _INLINE_MAX:  # small values: a blob row and its hash would cost more
                            kind, ref = _KIND_INLINE, type_.encode() + b"\0" + data
                        else:
                            kind, ref = _KIND_BLOB, self._store_serialized(cur, type_, data)
                    rows.append((thread_id, ns, channel, str(version), kind, ref))
                cur.executemany("INSERT OR REPLACE INTO versions VALUES (?, ?, ?, ?, ?, ?)", rows)
                self._pin_fork(cur, thread_id, ns, checkpoint["id"], metadata)
                cur.execute(
                    "INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (thread_id, ns, checkpoint["id"], conf.get("checkpoint_id"), f"{head_type}:{head_codec}",
                     head_packed, meta_type, meta_data),
                )
                self._puts += 1
                if self.keep_last is not None and self._puts % self.gc_every == 0:
                    deleted = self._retain(cur, thread_id, ns)
                    self._unswept += deleted
                    # Sweeping blobs scans every reference, so it runs once enough checkpoints have gone.
                    if self._unswept >= max(64, 4 * (self.keep_last or 0)):
                        self._collect_blobs(cur)
                        self._unswept = 0
            if deleted:
                cur.execute("PRAGMA incremental_vacuum")
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}}

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        conf = config["configurable"]
        thread_id, ns, checkpoint_id = str(conf["thread_id"]), conf.get("checkpoint_ns", ""), conf["checkpoint_id"]
        special = any(channel in WRITES_IDX_MAP for channel, _ in writes)
        replace = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        self._redactors = redactors()
        with self._lock:  # also guards the zstd contexts, which are not thread-safe
            for idx, (channel, value) in enumerate(writes):
                key = (thread_id, ns, checkpoint_id, task_id, WRITES_IDX_MAP.get(channel, idx), channel, task_path)
                if type(value) is list and value:
                    items = [self._dumps(item) for item in value]
                    self._pending.append((replace, key, _KIND_LIST, items))
                else:
                    type_, data = self._dumps(value)
                    kind = _KIND_INLINE if len(data) <= _INLINE_MAX else _KIND_BLOB
                    self._pending.append((replace, key, kind, (type_, data)))
            if special or not self.batch_writes:
                # Interrupts, errors and resume values are committed at once; ordinary task writes ride
                # along with the super-step's checkpoint (one transaction per super-step).
                self._commit_pending()

    def _write_pending(self, cur: sqlite3.Cursor) -> None:
        """Insert buffered task writes inside the caller's transaction."""
        if not self._pending:
            return
        keep_first: list[tuple[Any, ...]] = []
        keep_last: list[tuple[Any, ...]] = []
        for replace, key, kind, payload in self._pending:
            # Values beyond the inline size go to the blob store, shared with the channel value they become.
            if kind == _KIND_LIST:
                ref = b"".join(self._store_serialized(cur, type_, data) for type_, data in payload)
                row: tuple[Any, ...] = (*key, kind, None, None, ref)
            elif kind == _KIND_BLOB:
                row = (*key, _KIND_BLOB, None, None, self._store_serialized(cur, *payload))
            else:
                row = (*key, _KIND_INLINE, payload[0], _CODEC_RAW, payload[1])
            (keep_last if replace else keep_first).append(row)
        # Ignores before replaces ends with the same rows as running them in order: the last replace of a key
        # wins, otherwise its first write.
        cur.executemany("INSERT OR IGNORE INTO writes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", keep_first)
        cur.executemany("INSERT OR REPLACE INTO writes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", keep_last)
        self._pending.clear()

    def _commit_pending(self) -> None:
        if self._pending:
            with self._transaction() as cur:
                self._write_pending(cur)

    def flush(self) -> None:
        """Commit buffered task writes now (reads, close and the next checkpoint do this by themselves)."""
        with self._lock:
            self._commit_pending()

    def _tuple_from_row(self, cur: sqlite3.Cursor, row: tuple[Any, ...]) -> CheckpointTuple:
        thread_id, ns, checkpoint_id, parent_id, type_codec, packed, meta_type, meta_data = row
        head = self._load_head(type_codec, packed)
        head["channel_values"] = self._load_values(cur, thread_id, ns, head["channel_versions"])
        writes = cur.execute(
            "SELECT task_id, idx, channel, task_path, kind, type, codec, value FROM writes "
            "WHERE thread_id=? AND ns=? AND checkpoint_id=?",
            (thread_id, ns, checkpoint_id),
        ).fetchall()
        writes.sort(key=lambda w: writes_sort_key(w[3], w[0], w[1]))
        pending = [(task_id, channel, self._load_ref(cur, kind, value) if kind in (_KIND_LIST, _KIND_BLOB)
                    else self._loads(type_, self._decode(codec, value)))
                   for task_id, _, channel, _, kind, type_, codec, value in writes]

        def config(checkpoint_id: str) -> Any:
            return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}

        return CheckpointTuple(
            config=config(checkpoint_id),
            checkpoint=head,
            metadata=self._loads(meta_type, meta_data),
            parent_config=config(parent_id) if parent_id else None,
            pending_writes=pending,
        )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        conf = config["configurable"]
        root: RunnableConfig = {"configurable": {**conf, "checkpoint_ns": conf.get("checkpoint_ns", "")}}
        return next(self.list(root, limit=1), None)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        where: list[tuple[str, Any]] = []
        if config is not None:
            conf = config["configurable"]
            where.append(("thread_id = ?", str(conf["thread_id"])))
            if "checkpoint_ns" in conf:
                where.append(("ns = ?", conf["checkpoint_ns"]))
            if checkpoint_id := get_checkpoint_id(config):
                where.append(("checkpoint_id = ?", checkpoint_id))
        if before is not None and (before_id := get_checkpoint_id(before)):
            where.append(("checkpoint_id < ?", before_id))
        bounded = limit is not None and not filter  # then the query itself stops at `limit` rows
        sql = "SELECT * FROM checkpoints" + (" WHERE " + " AND ".join(w for w, _ in where) if where else "")
        sql += " ORDER BY checkpoint_id DESC" + (" LIMIT ?" if bounded else "")
        params = [v for _, v in where] + ([limit] if bounded else [])
        with self._lock:
            self._commit_pending()
            cur = self._conn.cursor()
            out: list[CheckpointTuple] = []
            for row in cur.execute(sql, params).fetchall():
                if limit is not None and len(out) >= limit:
                    break
                tup = self._tuple_from_row(cur, row)
                if not filter or all(tup.metadata.get(k) == v for k, v in filter.items()):
                    out.append(tup)
        yield from out

    def newest_per_thread(self) -> Sequence[CheckpointTuple]:
        """The newest checkpoint of each thread in the root namespace, newest first. One query picks them, and
        only they are read back: `list(None)` would read every checkpoint of every thread to find the same ones."""
        with self._lock:
            self._commit_pending()
            cur = self._conn.cursor()
            rows = cur.execute(
                "SELECT * FROM checkpoints WHERE ns = '' AND (thread_id, checkpoint_id) IN "
                "(SELECT thread_id, MAX(checkpoint_id) FROM checkpoints WHERE ns = '' GROUP BY thread_id) "
                "ORDER BY checkpoint_id DESC"
            ).fetchall()
            return [self._tuple_from_row(cur, row) for row in rows]

    def delete_thread(self, thread_id: str) -> None:
        with self._lock:
            self._commit_pending()
            with self._transaction() as cur:
                for table in ("checkpoints", "writes", "versions", "pins"):
                    cur.execute(f"DELETE FROM {table} WHERE thread_id = ?", (str(thread_id),))
                self._collect_blobs(cur)
            self._list_cache = {k: v for k, v in self._list_cache.items() if k[0] != str(thread_id)}

    # -- retention ------------------------------------------------------------------------------------

    @staticmethod
    def _pin_fork(cur: sqlite3.Cursor, thread_id: str, ns: str, checkpoint_id: str, metadata: Any) -> None:
        """A fork's first checkpoint (its metadata names `forked_from`) and its source stay through retention.
        Not a search branch's start (`forked_from` names its `search`): a search, resumed, needs only each
        branch's latest checkpoint, which is always kept."""
        origin = metadata.get("forked_from") if isinstance(metadata, dict) else None
        if not isinstance(origin, dict) or origin.get("search"):
            return
        pins = [(thread_id, ns, checkpoint_id)]
        if origin.get("thread_id") and origin.get("checkpoint_id"):
            pins.append((str(origin["thread_id"]), "", str(origin["checkpoint_id"])))
        cur.executemany("INSERT OR IGNORE INTO pins VALUES (?, ?, ?)", pins)

    def _retain(self, cur: sqlite3.Cursor, thread_id: str, ns: str) -> int:
        """Delete checkpoints beyond `keep_last` but the pinned ones (and what only they used); how many."""
        assert self.keep_last is not None
        old = cur.execute(
            "SELECT checkpoint_id FROM (SELECT checkpoint_id FROM checkpoints WHERE thread_id=? AND ns=? "
            "ORDER BY checkpoint_id DESC LIMIT -1 OFFSET ?) "
            "WHERE checkpoint_id NOT IN (SELECT checkpoint_id FROM pins WHERE thread_id=? AND ns=?)",
            (thread_id, ns, self.keep_last, thread_id, ns),
        ).fetchall()
        if not old:
            return 0
        for table in ("checkpoints", "writes"):
            cur.executemany(f"DELETE FROM {table} WHERE thread_id=? AND ns=? AND checkpoint_id=?",
                            [(thread_id, ns, r[0]) for r in old])
        kept: set[tuple[str, str]] = set()
        for type_codec, packed in cur.execute(
            "SELECT type, checkpoint FROM checkpoints WHERE thread_id=? AND ns=?", (thread_id, ns)
        ):
            head = self._load_head(type_codec, packed)
            kept.update((ch, str(v)) for ch, v in head["channel_versions"].items())
        stale = [
            (thread_id, ns, ch, v)
            for ch, v in cur.execute(
                "SELECT channel, version FROM versions WHERE thread_id=? AND ns=?", (thread_id, ns)
            )
            if (ch, v) not in kept
        ]
        cur.executemany("DELETE FROM versions WHERE thread_id=? AND ns=? AND channel=? AND version=?", stale)
        return len(old)

    def _collect_blobs(self, cur: sqlite3.Cursor) -> None:
        cur.execute("CREATE TEMP TABLE IF NOT EXISTS live (hash BLOB PRIMARY KEY) WITHOUT ROWID")
        cur.execute("DELETE FROM live")
        cur.execute("INSERT OR IGNORE INTO live SELECT ref FROM versions WHERE kind = ?", (_KIND_BLOB,))
        cur.execute("INSERT OR IGNORE INTO live SELECT value FROM writes WHERE kind = ?", (_KIND_BLOB,))
        manifests = cur.execute("SELECT ref FROM versions WHERE kind = ?", (_KIND_LIST,)).fetchall()
        manifests += cur.execute("SELECT value FROM writes WHERE kind = ?", (_KIND_LIST,)).fetchall()
        for (ref,) in manifests:
            cur.executemany(
                "INSERT OR IGNORE INTO live VALUES (?)", [(ref[i : i + 32],) for i in range(0, len(ref), 32)]
            )
        cur.execute("DELETE FROM blobs WHERE hash NOT IN (SELECT hash FROM live)")
        self._known &= {r[0] for r in cur.execute("SELECT hash FROM live")}

    def vacuum(self) -> None:
        """Run retention on every thread now and give freed pages back to the file system."""
        with self._lock:
            self._commit_pending()
            with self._transaction() as cur:
                if self.keep_last is not None:
                    for thread_id, ns in cur.execute("SELECT DISTINCT thread_id, ns FROM checkpoints").fetchall():
                        self._retain(cur, thread_id, ns)
                self._collect_blobs(cur)
                self._unswept = 0
            cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            cur.execute("VACUUM")

    def close(self) -> None:
        with self._lock:
            self._commit_pending()
            self._conn.close()
            if self._users >= 0:
                os.close(self._users)  # releases the shared lock
                self._users = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- async interface: SQLite calls here are short (WAL, synchronous=NORMAL), so they run inline ------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.get_tuple(config)

    async def alist(
        self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None, limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for item in self.list(config, filter=filter, before=before, limit=limit):
            yield item

    async def anewest_per_thread(self) -> Sequence[CheckpointTuple]:
        return self.newest_per_thread()

    async def aput(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions
    ) -> RunnableConfig:
        if self.metadata_hook is not None:
            metadata = {**metadata, **await self.metadata_hook(config)}  # type: ignore[typeddict-item]
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self.delete_thread(thread_id)

    def get_next_version(self, current: str | int | None, channel: None = None) -> str:
        # Zero-padded counter (orders as text) plus a random suffix: a fork from an older checkpoint
        # (update_state, time travel) must not reuse a version id that another branch already stored.
        n = current if isinstance(current, int) else int(str(current).split(".")[0]) if current is not None else 0
        return f"{n + 1:016}.{random.getrandbits(32):08x}"

    def prune(self, thread_ids: Sequence[str] | None = None, *, strategy: str = "keep_latest",
              keep_last: int | None = None, keep: Iterable[tuple[str, str]] = ()) -> None:
        """`keep_latest`: keep the newest `keep_last` checkpoints (default 1) of each of `thread_ids` (None:
        every thread) per namespace, and every pinned one (forks, and `keep`: (thread id, checkpoint id) pairs
        another database's forks name). `delete` removes the threads. `pruned` says how many went."""
        if strategy == "delete":
            if thread_ids is None:
                raise ValueError("prune(strategy='delete') needs the thread ids to delete")
            for thread_id in thread_ids:
                self.delete_thread(thread_id)
            return
        if keep_last is not None and keep_last < 1:
            raise ValueError(f"keep_last must be at least 1, got {keep_last}")
        with self._lock, self._alone():
            self._commit_pending()
            saved_keep, self.keep_last = self.keep_last, keep_last or 1
            try:
                with self._transaction() as cur:
                    self._pin_recorded_forks(cur)
                    cur.executemany("INSERT OR IGNORE INTO pins VALUES (?, '', ?)",
                                    [(str(t), str(c)) for t, c in keep])
                    pairs = cur.execute("SELECT DISTINCT thread_id, ns FROM checkpoints").fetchall()
                    wanted = None if thread_ids is None else {str(t) for t in thread_ids}
                    self.pruned = sum(self._retain(cur, thread_id, ns) for thread_id, ns in pairs
                                      if wanted is None or thread_id in wanted)
                    self._collect_blobs(cur)
            finally:
                self.keep_last = saved_keep
            cur.execute("PRAGMA incremental_vacuum")

    @contextlib.contextmanager
    def _alone(self) -> Iterator[None]:
        """The file's lock held exclusively (no other saver has it open), else a one-line UserError."""
        try:
            fcntl.flock(self._users, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fcntl.flock(self._users, fcntl.LOCK_SH)  # a refused upgrade may have dropped the shared lock
            raise UserError(f"{self.path} is open in another process (a run still going?)",
                            hint="prune it once that run has ended") from None
        try:
            yield
        finally:
            fcntl.flock(self._users, fcntl.LOCK_SH)

    def _pin_recorded_forks(self, cur: sqlite3.Cursor) -> None:
        """Pin the forks a file written before pins existed holds (their metadata names `forked_from`)."""
        rows = cur.execute("SELECT thread_id, ns, checkpoint_id, mtype, metadata FROM checkpoints").fetchall()
        for thread_id, ns, checkpoint_id, mtype, data in rows:
            if b"forked_from" in data:  # serialized metadata is not compressed: skip the rest unread
                self._pin_fork(cur, thread_id, ns, checkpoint_id, self._loads(mtype, data))

    async def aprune(self, thread_ids: Sequence[str] | None = None, *, strategy: str = "keep_latest",
                     keep_last: int | None = None, keep: Iterable[tuple[str, str]] = ()) -> None:
        self.prune(thread_ids, strategy=strategy, keep_last=keep_last, keep=keep)

    def counts(self) -> dict[str, int]:
        """Checkpoints, threads (root namespace) and stored blobs in the file now."""
        with self._lock:
            self._commit_pending()
            cur = self._conn.cursor()
            return {"checkpoints": cur.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0],
                    "threads": cur.execute("SELECT COUNT(DISTINCT thread_id) FROM checkpoints").fetchone()[0],
                    "blobs": cur.execute("SELECT COUNT(*) FROM blobs").fetchone()[0]}


async def newest_per_thread(saver: BaseCheckpointSaver[Any]) -> Sequence[CheckpointTuple]:
    """The newest checkpoint of each thread of `saver` in the root namespace, newest first. An
    `AgentflowSaver` reads only those; any other LangGraph saver (the in-memory one of a run without a run
    folder, Postgres) is walked whole (`alist` gives each thread's checkpoints newest first: the first of each
    thread is kept)."""
    if isinstance(saver, AgentflowSaver):
        return await saver.anewest_per_thread()
    newest: dict[str, CheckpointTuple] = {}
    async for saved in saver.alist(None):
        conf = saved.config["configurable"]
        if not conf.get("checkpoint_ns"):
            newest.setdefault(str(conf["thread_id"]), saved)
    return sorted(newest.values(), key=lambda saved: str(saved.config["configurable"]["checkpoint_id"]),
                  reverse=True)
