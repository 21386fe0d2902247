"""The run ledger: what a run has done, kept in its folder by `WorkflowRunner(spec, run_dir=...)`, whichever
entry point ran it (docs/concepts/workflows.md):

    runs/<run_id>/run.json       run id, thread id, workflow; the last leg's status and stop reason (the CLI
                                 adds the options it was started with: model, sandbox, workspace, limits...)
    runs/<run_id>/events.jsonl   every model call, tool call and node transition (when the caller brings no
                                 event log of its own), appended across resumes
    runs/<run_id>/usage.json     the budget's usage so far per thread (`threads`) and summed (the top level),
                                 rewritten after every model call, tool call and node
    runs/<run_id>/patch.diff     the sandbox workspace's diff so far, rewritten before each completed tool call
                                 is journaled, at every checkpoint and at the end of each leg
    runs/<run_id>/diffs/         the workspace's diff at each checkpoint, for forks (history.py)
    runs/<run_id>/base.json      the workspace the run started from (each file's digest) and the diffs since
                                 applied to that folder (`run --apply`): a fork rebuilds that start from them

A runner opened on a folder that holds a ledger carries it on: its budget counts one thread at a time, from
that thread's usage in `usage.json` (the sum across its interrupted and resumed legs; a new thread or a fork
starts at zero) and, on `resume`, the fresh sandbox gets `patch.diff`
applied before the node that was cut short runs again, so the tool calls the journal replays find their
edits in place. The workspace is written before a call's result is journaled: a call the journal replays
always has its edits in `patch.diff` (a crash between the two re-runs that one call on a workspace that
already holds its effect).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentflow.budget import Budget, BudgetUsage
from agentflow.errors import UserError
from agentflow.events.kinds import LimitReached, ModelCall, NodeEnd, NodeFailure, ToolCalled
from agentflow.runfiles import make_folder, read_text, replace_file
from agentflow.runrecord import SIGNED_FIELDS, sign, verified
from agentflow.secrets import redact

RUN_FILE = "run.json"
USAGE_FILE = "usage.json"
DIFF_FILE = "patch.diff"
BASE_FILE = "base.json"
SAVE_USAGE_ON = (ModelCall, ToolCalled, NodeEnd, NodeFailure, LimitReached)
"""Event kinds after which usage.json is rewritten (what was charged is on disk before the next call)."""


@dataclass
class WorkspaceBase:
    """The workspace a run started from: `files` maps each file's path to its digest (None until the sandbox
    loads the folder and fills it in), `applied` the diffs applied to the folder since (oldest first)."""

    files: dict[str, str] | None = None
    applied: list[str] = field(default_factory=list)


class RunLedger:
    """Reads and writes a run folder's record, usage and workspace diff."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)

    # -- run.json -------------------------------------------------------------------------------------------

    def record(self) -> dict[str, Any]:
        """run.json as written so far ({} when there is none yet)."""
        return read_record(self.run_dir, missing_ok=True)

    def update_record(self, **fields: Any) -> dict[str, Any]:
        """Merge `fields` into run.json (secrets redacted) and return the whole record. A change to a field a
        resume executes with is signed (`runrecord`) only when the record was new or already signed."""
        before = self.record()
        data: dict[str, Any] = redact({**before, **fields})
        if any(before.get(k) != data.get(k) for k in SIGNED_FIELDS) and (not before or verified(before)):
            data = sign(data)
        _write_atomic(self.run_dir / RUN_FILE, json.dumps(data), code=False)
        return data

    def begin(self, thread_id: str, workflow: str) -> dict[str, Any]:
        """Name the run (run id, thread id, workflow) in run.json when nothing did yet."""
        data = self.record()
        missing = {k: v for k, v in (("run_id", self.run_dir.name), ("thread_id", thread_id),
                                     ("workflow", workflow)) if data.get(k) is None}
        return self.update_record(**missing) if missing else data

    @property
    def run_id(self) -> str:
        return str(self.record().get("run_id") or self.run_dir.name)

    # -- usage.json -----------------------------------------------------------------------------------------

    def usage(self) -> dict[str, BudgetUsage]:
        """Thread id -> what that thread has spent so far ({} for a new run)."""
        path = self.run_dir / USAGE_FILE
        text = read_text(path)  # never through a link the folder brings
        if text is None:
            return {}
        try:
            data = json.loads(text)
            threads = data.get("threads")
            if threads is None:
                return {str(self.record().get("thread_id") or ""): BudgetUsage.model_validate(data)}
            return {str(t): BudgetUsage.model_validate(u) for t, u in threads.items()}
        except (ValueError, AttributeError):
            raise UserError(f"{path} is damaged", hint="delete it to restart the run's spend from zero") from None

    def spent(self, thread_id: str) -> BudgetUsage | None:
        """What earlier legs of thread `thread_id` spent (None for a new thread)."""
        return self.usage().get(thread_id)

    def save_usage(self, budget: Budget | None, thread_id: str | None) -> None:
        """Record `budget`'s usage as thread `thread_id`'s (the top level sums the run's threads)."""
        if budget is None or not thread_id:
            return
        threads = {**self.usage(), thread_id: budget.used}
        total = BudgetUsage(**{kind: sum(getattr(used, kind) for used in threads.values())
                               for kind in BudgetUsage.model_fields})
        data = {**total.model_dump(), "threads": {t: u.model_dump() for t, u in threads.items()}}
        _write_atomic(self.run_dir / USAGE_FILE, json.dumps(data), code=False)

    # -- patch.diff -----------------------------------------------------------------------------------------

    def diff(self) -> str | None:
        return read_text(self.run_dir / DIFF_FILE)  # never through a link the folder brings

    def save_diff(self, patch: str) -> None:
        _write_atomic(self.run_dir / DIFF_FILE, patch, code=True)

    # -- base.json ------------------------------------------------------------------------------------------

    def base(self) -> WorkspaceBase | None:
        """The workspace the run started from (None for a run without one, or from before it was kept)."""
        path = self.run_dir / BASE_FILE
        text = read_text(path)
        if text is None:
            return None
        try:
            data = json.loads(text)
            return WorkspaceBase(files={str(k): str(v) for k, v in data["files"].items()},
                                 applied=[str(d) for d in data.get("applied", [])])
        except (ValueError, KeyError, AttributeError, TypeError):
            raise UserError(f"{path} is damaged", hint="fork a copy of the workspace as the run started "
                            "from: --workspace COPY") from None

    def save_base(self, base: WorkspaceBase) -> None:
        _write_atomic(self.run_dir / BASE_FILE, json.dumps({"files": base.files, "applied": base.applied}),
                      code=True)

    def record_applied(self, patch: str) -> None:
        """Note that `patch` was applied to the workspace folder the run started from (`run --apply`)."""
        base = self.base()
        if base is not None and base.files is not None:
            base.applied.append(patch)
            self.save_base(base)


class WorkspaceJournal:
    """A `ToolJournal` that has the run's workspace written (`keep(key)`) before it records a completed call,
    so a call replayed after a crash finds its edits in the restored workspace."""

    def __init__(self, inner: Any, keep: Callable[[str], Awaitable[None]]) -> None:
        self.inner = inner
        self.keep = keep

    async def aput(self, key: str, result: Any) -> None:
        """Keep the workspace, then record the call (the order a crash cannot turn into a lost edit)."""
        await self.keep(key)
        await asyncio.to_thread(self.inner.put, key, result)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def read_record(run_dir: Path, *, missing_ok: bool = False) -> dict[str, Any]:
    """run.json of `run_dir` (a regular file: never read through a link); a one-line UserError when unreadable,
    or missing unless `missing_ok` ({} then)."""
    path = run_dir / RUN_FILE
    try:
        text = read_text(path)
        data = json.loads(text) if text is not None else None
    except (OSError, ValueError, RecursionError) as exc:
        raise UserError(f"{path} cannot be read ({exc.__class__.__name__})", hint="the run folder is damaged") from None
    if data is None and missing_ok:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"{path} is not a run record", hint="the run folder is damaged")
    return data


def _write_atomic(path: Path, text: str, *, code: bool) -> None:
    """Replace `path` atomically, secrets redacted (for code, the workspace diff, known secrets only)."""
    make_folder(path.parent)
    replace_file(path, redact(text, urls=not code))


__all__ = ["BASE_FILE", "DIFF_FILE", "RUN_FILE", "SAVE_USAGE_ON", "USAGE_FILE", "RunLedger", "WorkspaceBase", "WorkspaceJournal",
           "read_record"]
