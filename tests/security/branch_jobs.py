"""Node functions of the branch-isolation tests (importable as `tests.security.branch_jobs:NAME`).

Branch b0 fixes `src/mod.py`, tests it, then runs the state's `job` (a command that leaves a background job
behind) as its last act, and opens the gate. Branch b1 waits at the gate, so it works while b0's job would
be running, writes its own fix, and tests it for a second (long enough for a job that fires after 0.3 s).
b0 is worth 0.5 when its tests pass, b1 1.0: b1 is chosen unless something broke it.
"""

from __future__ import annotations

import asyncio
from typing import Any

# the branch's test: the module from the workspace, run from a copy in the temp folder (a job may aim at either;
# the local backend's is the sandbox's own)
CHECK = 'cp tests/check.py "${{TMPDIR:-/tmp}}/check.py" && sleep {pause} && python3 "${{TMPDIR:-/tmp}}/check.py"'
GATE: dict[str, asyncio.Event] = {}


def _gate() -> asyncio.Event:
    return GATE.setdefault("b0 done", asyncio.Event())


def _index(ctx: Any) -> int:
    return int(str(ctx.run.branch).rsplit("~", 1)[-1][1:])


async def work(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    k = _index(ctx)
    sandbox = ctx.run.sandbox
    if k == 0:
        await sandbox.write_file("src/mod.py", "def f():\n    return 1  # b0\n")
        ok = (await sandbox.exec(CHECK.format(pause=0))).ok
        if state.get("job"):
            await sandbox.exec(state["job"])
        _gate().set()
        score = 0.5 if ok else 0.0
    else:
        await asyncio.wait_for(_gate().wait(), 60)
        await sandbox.write_file("src/mod.py", "def f():\n    return 1  # good\n")
        ok = (await sandbox.exec(CHECK.format(pause=1))).ok
        score = 1.0 if ok else 0.0
    diff = await sandbox.diff()
    return {"score": score, "records": [{"branch": f"b{k}", "ok": ok, "diff": diff}]}


async def settle(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """The main line works on in the chosen workspace for a while (a late job would land in it)."""
    await ctx.run.sandbox.exec("sleep 2")
    return {}
