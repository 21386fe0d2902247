"""A benchmark's per-item journal (`--journal FILE`): every finished (method, item) row is appended as one JSON
line, and a rerun with the same file skips the rows already there, so a run longer than one sitting (all 164
HumanEval problems for four methods is many hours on two cores) can be stopped and taken up again. Rows carry
the settings that change a measurement (model, N, sandbox; not the seed or limit that only pick the items, so a
seeded subset's rows count in the full run) and the agentflow commit they were measured at; a row of other
settings is not reused, and the commits a result spans are reported with it. Not a script: the benchmarks import it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any


def commit() -> str:
    """The checkout's commit (with `+dirty` when it has uncommitted changes), or `unknown`."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


Settings = dict[str, Any]


class Journal:
    """Rows of one benchmark run keyed by (method, item id); a row counts only when its settings are the method's.

    `settings` is one dict for every method, or a function of the method giving the settings that change that
    method's measurements (best-of-N's N is not a setting of the single greedy answer, so a rerun with another N
    takes up the greedy rows)."""

    def __init__(self, path: str | None, settings: Settings | Callable[[str], Settings]) -> None:
        self.path = Path(path) if path else None
        self.settings_of: Callable[[str], Settings] = settings if callable(settings) else (lambda _method: settings)
        self.commit = commit()
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}
        if self.path is not None and self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                if row.get("settings") == self.settings_of(row["method"]):
                    self.rows[(row["method"], row["id"])] = row

    def done(self, method: str, item_id: str) -> dict[str, Any] | None:
        return self.rows.get((method, item_id))

    def add(self, method: str, item_id: str, row: dict[str, Any]) -> dict[str, Any]:
        full = {"method": method, "id": item_id, **row, "commit": self.commit, "settings": self.settings_of(method)}
        self.rows[(method, item_id)] = full
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(full) + "\n")
        return full

    async def measure(self, method: str, item_id: str, measure: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """The journal's row for (method, item), measured now (and printed to stderr as progress) if it has none."""
        row = self.done(method, item_id)
        if row is None:
            row = self.add(method, item_id, await measure())
            print(json.dumps({k: v for k, v in row.items() if k not in ("settings", "ucb")}), file=sys.stderr, flush=True)
        return row

    def commits(self) -> list[str]:
        return sorted({r["commit"] for r in self.rows.values()})
