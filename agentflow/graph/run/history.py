"""A run's checkpoints as a history to fork from, with the workspace as it was at each of them.

As each checkpoint is written the runner records the workspace's diff against its base, once per distinct
diff, in `runs/<run_id>/diffs/<sha256>.diff.zst`, and its hash in the checkpoint's metadata
(`workspace_diff`). Forking reads another run's checkpoints from a copy of its database.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import zstandard

from agentflow.errors import UserError, did_you_mean
from agentflow.graph.persist.compression import decompress
from agentflow.graph.run.ledger import read_record
from agentflow.runfiles import check_regular, make_folder, read_bytes, replace_file
from agentflow.secrets import redact

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

DIFF_KEY = "workspace_diff"
"""Checkpoint metadata key holding the hash of the workspace diff at that checkpoint."""
DIFFS_DIR = "diffs"
GRAPH_KEY = "graph"
"""Checkpoint metadata key of a thread forked from a search branch's checkpoint: the search nodes whose
subgraph it runs (`attempt`, nested `attempt/inner`), so any runner of the workflow continues it as that graph."""


def root_config(thread_id: str | None) -> RunnableConfig:
    """The config of thread `thread_id`'s latest checkpoint in the root namespace."""
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


class DiffStore:
    """Content-addressed workspace diffs in `<run_dir>/diffs/`: one file per distinct diff."""

    def __init__(self, run_dir: str | Path) -> None:
        self.root = Path(run_dir) / DIFFS_DIR

    def _path(self, digest: str) -> Path:
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise UserError(f"bad workspace diff id {digest!r} in a checkpoint", hint="the run folder is damaged")
        return self.root / f"{digest}.diff.zst"

    def put(self, diff: str) -> str:
        """Store `diff` (secrets redacted, as patch.diff) once; returns its id (sha256 of the stored text)."""
        text = redact(diff, urls=False)
        digest = hashlib.sha256(text.encode()).hexdigest()
        path = self._path(digest)
        if not check_regular(path).is_file():
            make_folder(self.root)
            replace_file(path, zstandard.ZstdCompressor(level=3).compress(text.encode()))
        return digest

    def get(self, digest: str) -> str:
        path = self._path(digest)
        if not path.is_file():
            raise UserError(f"the workspace diff {digest[:12]} is missing from {self.root}",
                            hint="the run folder is incomplete; fork from another checkpoint")
        return decompress(read_bytes(path) or b"", f"the workspace diff {path}").decode(errors="replace")


@dataclass
class CheckpointInfo:
    """One checkpoint of a thread (root namespace), as `agentflow run --history` lists it."""

    checkpoint_id: str
    step: int
    source: str
    """`input`, `loop` (a super-step ended), `update` (a state edit) or `fork` (a fork's first checkpoint)."""
    after: list[str]
    """Nodes whose writes this checkpoint is the first to hold."""
    next: list[str]
    """Nodes that run next from here (empty: the run ended here)."""
    created_at: str | None
    workspace_diff: str | None = None
    """Id of the workspace diff recorded with the checkpoint (None: the run had no sandbox)."""
    values: dict[str, Any] = field(default_factory=dict, repr=False)
    searches: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """State key -> the branches of the search report this checkpoint is the first to hold (`branch_lines`)."""

    def summary(self) -> dict[str, Any]:
        """The fields but the state's `values` (and `searches` when there are none), as `--history --json`."""
        return {k: v for k, v in vars(self).items() if k != "values" and (v or k != "searches")}


def new_searches(values: dict[str, Any], before: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The search reports in `values` that `before` (the parent checkpoint's values) did not hold, by key."""
    return {key: [_branch_line(b) for b in value["branches"] if isinstance(b, dict)]
            for key, value in values.items() if _is_search_report(value) and before.get(key) != value}


def _is_search_report(value: Any) -> bool:
    return isinstance(value, dict) and {"strategy", "chosen", "branches"} <= set(value) and isinstance(
        value["branches"], list)


def _branch_line(branch: dict[str, Any]) -> dict[str, Any]:
    tests = branch.get("tests")
    ok = tests.get("ok", tests.get("passed")) if isinstance(tests, dict) else tests if isinstance(tests, bool) else None
    return {"id": branch.get("id"), "parent": branch.get("parent"), "value": branch.get("value"),
            "mean": branch.get("mean", branch.get("value")), "tests_ok": ok, "terminal": branch.get("terminal"),
            "error": branch.get("error"), "diff_id": branch.get("diff_id"), "thread": branch.get("thread")}


def branch_lines(searches: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The branches of a checkpoint's search reports as `agentflow run --history` prints them, one line each."""
    lines = []
    for key, branches in searches.items():
        lines.append(f"    search report '{key}': {len(branches)} branches")
        for b in branches:
            tests = {True: "pass", False: "fail"}.get(b["tests_ok"], "-")
            parent = f"<- {b['parent']}" if b.get("parent") else ""
            value = f"value {_num(b['value'])} mean {_num(b['mean'])}"
            state = "error: " + str(b["error"])[:80] if b.get("error") else "end" if b.get("terminal") else "open"
            diff = f"diff {str(b['diff_id'])[:12]}" if b.get("diff_id") else "no diff"
            lines.append(f"      {b['id']!s:<5} {parent:<8} {value}  tests {tests:<4}  {state:<5}  {diff}  "
                         f"thread {b.get('thread') or '-'}")
    return lines


def _num(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else "-"


async def thread_history(graph: Any, thread_id: str) -> list[CheckpointInfo]:
    """The kept checkpoints of `thread_id`, oldest first (a UserError when there are none)."""
    snapshots = [s async for s in graph.aget_state_history({"configurable": {"thread_id": thread_id}})]
    if not snapshots:
        raise UserError(f"no checkpoint for thread {thread_id!r}", hint="check the thread id and -o/--output")
    snapshots.reverse()
    by_id = {s.config["configurable"]["checkpoint_id"]: s for s in snapshots}
    out = []
    for snap in snapshots:
        parent = (snap.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        meta = snap.metadata or {}
        out.append(CheckpointInfo(
            checkpoint_id=snap.config["configurable"]["checkpoint_id"],
            step=int(meta.get("step", -1)),
            source="fork" if "forked_from" in meta and parent is None else str(meta.get("source", "")),
            after=list(by_id[parent].next) if parent in by_id and meta.get("source") == "loop" else [],
            next=list(snap.next),
            created_at=snap.created_at,
            workspace_diff=meta.get(DIFF_KEY),
            values=dict(snap.values) if isinstance(snap.values, dict) else {},
        ))
        before = by_id[parent].values if parent in by_id and isinstance(by_id[parent].values, dict) else {}
        out[-1].searches = new_searches(out[-1].values, before)
    return out


def pick_checkpoint(history: list[CheckpointInfo], thread_id: str, *, checkpoint_id: str | None = None,
                    after_node: str | None = None) -> CheckpointInfo:
    """The checkpoint named by id (a unique prefix), else the latest after `after_node` ran, else the latest."""
    hint = f"list them with: agentflow run --history {thread_id}"
    if checkpoint_id is not None:
        found = [c for c in history if c.checkpoint_id.startswith(checkpoint_id)] if checkpoint_id else []
        if len(found) != 1:
            what = "no" if not found else "more than one"
            raise UserError(f"thread {thread_id!r} has {what} checkpoint {checkpoint_id!r}", hint=hint)
        return found[0]
    if after_node is not None:
        found = [c for c in history if after_node in c.after]
        if not found:
            ran = [node for c in history for node in c.after]
            raise UserError(f"thread {thread_id!r} has no kept checkpoint after node {after_node!r}"
                            f"{did_you_mean(after_node, ran)}", hint=hint)
        return found[-1]
    return history[-1]


def copy_database(src: Path, into: Path) -> Path:
    """A copy of the checkpoint database `src` (with its WAL, if a crashed run left one) inside `into`."""
    if not src.is_file():
        raise UserError(f"{src} does not exist", hint="fork a run that used the sqlite checkpointer")
    for suffix in ("", "-wal"):
        if Path(str(src) + suffix).is_file():
            shutil.copyfile(str(src) + suffix, into / (src.name + suffix))
    return into / src.name


CHECKPOINT_FILE = "checkpoints.db"
"""A run folder's SQLite checkpoint file (the runner's default checkpointer)."""


def fork_sources(root: Path) -> dict[Path, list[tuple[str, str]]]:
    """Run folder under `root` -> the (thread id, checkpoint id) pairs of its checkpoints that forks in other
    run folders were taken from (their run.json names `forked_from`)."""
    records: dict[Path, dict[str, Any]] = {}
    for meta in sorted(root.glob("*/run.json")) if root.is_dir() else []:
        try:
            records[meta.parent] = read_record(meta.parent)
        except UserError:  # a damaged record names no fork: its run is pruned as any other
            continue
    by_id = {str(r.get("run_id") or d.name): d for d, r in records.items()}
    sources: dict[Path, list[tuple[str, str]]] = {}
    for record in records.values():
        origin = record.get("forked_from")
        if not isinstance(origin, dict) or not origin.get("thread_id") or not origin.get("checkpoint_id"):
            continue
        source = by_id.get(str(origin.get("run_id")))
        if source is not None:
            sources.setdefault(source, []).append((str(origin["thread_id"]), str(origin["checkpoint_id"])))
    return sources


def prune_run(run_dir: Path, keep_last: int, keep: list[tuple[str, str]]) -> dict[str, Any]:
    """Prune the checkpoint file of `run_dir` (`AgentflowSaver.prune`): what it held and holds now."""
    from agentflow.graph.persist.checkpoint import AgentflowSaver

    db = run_dir / CHECKPOINT_FILE
    size = _file_bytes(db)
    with AgentflowSaver(db, keep_last=None) as saver:
        before = saver.counts()
        saver.prune(keep_last=keep_last, keep=keep)
        after = saver.counts()
    return {"run_dir": str(run_dir), "threads": after["threads"], "checkpoints_before": before["checkpoints"],
            "checkpoints": after["checkpoints"], "bytes_before": size, "bytes": _file_bytes(db)}


def _file_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.is_file())


__all__ = ["CHECKPOINT_FILE", "DIFF_KEY", "GRAPH_KEY", "CheckpointInfo", "DiffStore", "branch_lines", "copy_database",
           "fork_sources", "pick_checkpoint", "prune_run", "root_config", "thread_history"]
