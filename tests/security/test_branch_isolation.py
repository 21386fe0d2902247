"""Search branches are isolated: a branch that leaves a background job behind cannot touch another branch.

Branches of a search take turns in one sandbox (graph/search/workspace.py). A job one branch leaves running
(nohup, setsid, a double fork, a plain `&`) would write into whichever branch's workspace is restored next:
its source, its tests, the files it runs from /tmp, and so its value and the search's choice. Each branch's
turn ends every process in the sandbox but its agent, so:
- a search in which branch b0 leaves such a job ends with the same values, diffs, choice and final workspace
  as the same search without it (`test_a_branchs_background_job_changes_no_other_branch`), for each way of
  leaving a job and each place it aims at;
- after a branch's operation, no process it started is left (`test_a_branchs_jobs_end_with_its_turn`),
  in Docker and in the local backend; commands the host still awaits are spared, a cancelled one is not;
- a repair search's rollouts take turns the same way (`SandboxTurn`, the workbench's lock).
"""

from __future__ import annotations

import asyncio
import shlex
import subprocess
import warnings
from pathlib import Path
from typing import Any

import pytest

from agentflow.graph.search.workspace import BranchSandbox, SharedSandbox
from agentflow.sandbox.local import LocalBackendWarning
from tests.security import branch_jobs

# -- ways to leave a job behind ---------------------------------------------------------------------------------

DOUBLE_FORK = (
    "import os, sys\n"
    "if os.fork(): os._exit(0)\n"
    "os.setsid()\n"
    "if os.fork(): os._exit(0)\n"
    "os.execvp('sh', ['sh', '-c', sys.argv[1]])\n"
)


def leave(how: str, body: str) -> str:
    """A command that starts `body` as a background job `how` and returns at once."""
    job = shlex.quote(body)
    deaf = shlex.quote("trap '' HUP INT TERM QUIT; " + body)
    return {
        "ampersand": f"sh -c {job} >/dev/null 2>&1 </dev/null &",
        "nohup": f"nohup sh -c {job} >/dev/null 2>&1 </dev/null &",
        "setsid": f"setsid sh -c {job} >/dev/null 2>&1 </dev/null &",
        "double_fork": f"python3 -c {shlex.quote(DOUBLE_FORK)} {job} >/dev/null 2>&1 </dev/null",
        "ignores_signals": f"sh -c {deaf} >/dev/null 2>&1 </dev/null &",
    }[how]


LAUNCHES = ("ampersand", "nohup", "setsid", "double_fork", "ignores_signals")
BROKEN = {
    "src": "echo broken > src/mod.py",
    "tests": "printf 'raise SystemExit(1)\\n' > tests/check.py",
    "tmp": "printf 'raise SystemExit(1)\\n' > \"${TMPDIR:-/tmp}/check.py\"",
}
WHEN = {
    "after 0.3 s": "sleep 0.3; {write}",
    # waits for the other branch's file, then strikes: no timing assumption
    "on sight": "while ! grep -q good src/mod.py 2>/dev/null; do sleep 0.02; done; {write}",
    # sleeps past the other branch's whole run: lands in the main line's workspace after the search
    "late": "sleep 1.5; {write}",
    "again and again": "sleep 0.3; while :; do {write}; sleep 0.05; done",
}


def _sabotage() -> list[tuple[str, str, str]]:
    """(launch, target, timing): every launch striking the source as soon as the other branch's fix appears,
    every target struck again and again (so whenever the other branch copies or runs its file), and every
    timing, with two launches each."""
    cases = {(how, "src", "on sight") for how in LAUNCHES}
    cases |= {(how, target, "again and again") for target in BROKEN for how in ("nohup", "double_fork")}
    cases |= {(how, "src", when) for when in WHEN for how in ("setsid", "double_fork")}
    return sorted(cases)


# -- a search in Docker ---------------------------------------------------------------------------------------


def _repo(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "src" / "mod.py").write_text("def f():\n    return 0\n")
    (root / "tests" / "check.py").write_text("import sys\nsys.path.insert(0, 'src')\nimport mod\nassert mod.f() == 1\n")
    for cmd in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"]):
        subprocess.run(["git", *cmd], cwd=root, check=True)
    return root


WORKFLOW = {
    "name": "isolated",
    "state": {"job": {"type": "str"}, "score": {"type": "float"}, "records": {"type": "list"},
              "report": {"type": "dict"}},
    "nodes": {
        "go": {"search": {"strategy": "best_of_n", "n": 2, "concurrency": 2, "value": "score",
                          "gather": ["records"]},
               "output": "report", "next": "settle",
               "subgraph": {"name": "branch", "nodes": {
                   "work": {"fn": "tests.security.branch_jobs:work", "writes": ["score", "records"],
                            "next": "END"}}}},
        "settle": {"fn": "tests.security.branch_jobs:settle", "next": "END"},
    },
}


async def _search(tmp_path: Path, job: str, backend: str) -> dict[str, Any]:
    """The search's outcome: each branch's value, test result and diff, the choice, the run's final diff."""
    from agentflow.graph import WorkflowRunner
    from agentflow.graph.define.loader import spec_from_dict

    branch_jobs.GATE.clear()
    runner = WorkflowRunner(spec_from_dict(WORKFLOW), run_dir=tmp_path / "run", sandbox=backend,
                            workspace=_repo(tmp_path / "repo"))
    async with runner:
        result = await runner.start({"job": job}, thread_id="t")
        final = await runner.diff()
    report = result.state["report"]
    return {
        "values": {b["id"]: b["value"] for b in report["branches"]},
        "errors": {b["id"]: b["error"] for b in report["branches"]},
        "chosen": report["chosen"],
        "records": sorted((r["branch"], r["ok"], r["diff"]) for r in result.state["records"]),
        "final": final,
    }


BACKENDS = [pytest.param("docker", marks=pytest.mark.docker), "local"]
_WITHOUT_JOB: dict[str, dict[str, Any]] = {}


def _without_job(tmp_path_factory: pytest.TempPathFactory, backend: str) -> dict[str, Any]:
    """The same search without a job (once per backend)."""
    if backend not in _WITHOUT_JOB:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LocalBackendWarning)
            _WITHOUT_JOB[backend] = asyncio.run(_search(tmp_path_factory.mktemp("baseline"), "", backend))
    return _WITHOUT_JOB[backend]


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_search_without_a_job_chooses_the_better_branch(
    tmp_path_factory: pytest.TempPathFactory, backend: str
) -> None:
    without_job = _without_job(tmp_path_factory, backend)
    assert without_job["values"] == {"b0": 0.5, "b1": 1.0} and without_job["chosen"] == "b1"
    assert "+    return 1  # good" in without_job["final"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("how", "target", "when"), _sabotage())
def test_a_branchs_background_job_changes_no_other_branch(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, backend: str, how: str, target: str, when: str
) -> None:
    job = leave(how, WHEN[when].format(write=BROKEN[target]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LocalBackendWarning)
        outcome = asyncio.run(_search(tmp_path, job, backend))
    assert outcome == _without_job(tmp_path_factory, backend)


# -- the processes of a branch's turn -----------------------------------------------------------------------------

# What is left below this sandbox's agent (the ancestor of this check whose boot line names it), besides this
# check itself.
LEFT = r"""
import os
me = {os.getpid(), os.getppid()}
kids, parent, cmd = {}, {}, {}
for p in filter(str.isdigit, os.listdir('/proc')):
    try:
        stat = open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()
        cmd[int(p)] = open(f'/proc/{p}/cmdline', 'rb').read()
    except OSError:
        continue
    parent[int(p)] = int(stat[1])
    if stat[0] != 'Z':
        kids.setdefault(int(stat[1]), []).append(int(p))
mark = b'agentflow' + b'-agent'  # not spelled whole: this check's own command line holds this text
agent = os.getpid()
while mark not in cmd.get(agent, mark):
    agent = parent[agent]
todo, left = [agent], []
while todo:
    for k in kids.get(todo.pop(), []):
        todo.append(k)
        if k not in me:
            left.append(k)
print(len(left))
"""


async def _left(sandbox: Any) -> int:
    res = await sandbox.exec(f"python3 -c {shlex.quote(LEFT)}")
    assert res.ok, res.output
    return int(res.stdout.split()[-1])


async def _start(backend: str, tmp_path: Path) -> Any:
    from agentflow.sandbox import start_sandbox
    from agentflow.sandbox.config import SandboxConfig

    if backend == "local":
        with pytest.warns(LocalBackendWarning):
            return await start_sandbox("local", SandboxConfig())
    return await start_sandbox("docker", SandboxConfig())


JOB = "while :; do echo tick >> ticks.txt; sleep 0.05; done"
STARTED = "for i in $(seq 200); do [ -s ticks.txt ] && break; sleep 0.05; done"
"""Waits (in the command that left the job) until the job has ticked once."""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", LAUNCHES)
async def test_a_branchs_jobs_end_with_its_turn(tmp_path: Path, backend: str, how: str) -> None:
    sandbox = await _start(backend, tmp_path)
    try:
        shared = SharedSandbox(sandbox)
        branch = BranchSandbox(shared, await shared.snapshot())
        await branch.exec(f"{leave(how, JOB)}\n{STARTED}")
        assert await _left(sandbox) == 0
        # and nothing writes into the workspace after the branch's snapshot: it stays as the snapshot has it
        ticks = await sandbox.read_file("ticks.txt")
        await asyncio.sleep(0.3)
        assert await sandbox.read_file("ticks.txt") == ticks
        assert await sandbox.diff_snapshots(branch.snapshot_id, await sandbox.snapshot()) == ""
    finally:
        await sandbox.close()


USER_SITE_HOOKS = {
    "usercustomize": ("usercustomize.py", "open({marker!r}, 'w').write('ran')\n"),
    "pth": ("hook.pth", "import os; open({marker!r}, 'w').write('ran')\n"),
}
"""Files in Python's user site (under HOME, which outlives a branch's turn) that run in every later Python."""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("hook", sorted(USER_SITE_HOOKS))
async def test_a_branchs_user_site_hook_runs_in_no_later_python(tmp_path: Path, backend: str, hook: str) -> None:
    sandbox = await _start(backend, tmp_path)
    try:
        shared = SharedSandbox(sandbox)
        first = BranchSandbox(shared, await shared.snapshot())
        second = BranchSandbox(shared, first.snapshot_id)
        name, body = USER_SITE_HOOKS[hook]
        marker = "$HOME/hook-ran"
        site = "$(python3 -c 'import site; print(site.getuserbase())')/lib/python3.$(python3 -c 'import sys; print(sys.version_info[1])')/site-packages"
        placed = await first.exec(
            f'd="{site}"; mkdir -p "$d" && python3 -c "import sys; open(sys.argv[1], \'w\').write(sys.argv[2])" '
            f'"$d/{name}" {shlex.quote(body.format(marker="MARKER"))} && sed -i "s#MARKER#$HOME/hook-ran#" "$d/{name}" '
            f'&& ls "$d/{name}"')
        assert placed.ok, placed.output
        ran = await second.exec(f'python3 -c "print(1)"; test -e "{marker}" && echo RAN || echo CLEAN')
        assert ran.stdout.split()[-1] == "CLEAN"
    finally:
        await sandbox.close()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_turn_spares_the_commands_the_host_awaits_and_ends_a_cancelled_one(
    tmp_path: Path, backend: str
) -> None:
    sandbox = await _start(backend, tmp_path)
    try:
        shared = SharedSandbox(sandbox)
        branch = BranchSandbox(shared, await shared.snapshot())
        # a command of the host's own (a diff, say) runs beside the branch's turn and finishes
        awaited = asyncio.ensure_future(sandbox.exec("sleep 1; echo alive"))
        await asyncio.sleep(0.3)
        await branch.exec("true")
        result = await awaited
        assert result.ok and result.stdout.strip() == "alive"
        # a branch's command cancelled halfway (the search was decided) does not run on
        cancelled = asyncio.ensure_future(branch.exec("sleep 300"))
        await asyncio.sleep(0.5)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert await _left(sandbox) == 0
    finally:
        await sandbox.close()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", LAUNCHES)
async def test_a_repair_rollouts_jobs_end_with_its_turn(tmp_path: Path, backend: str, how: str) -> None:
    """The workbench's lock, which a repair search's rollouts take turns under: what a candidate's run left
    ends as the rollout lets go (on the task's sandbox and on a branch's view of it alike)."""
    from agentflow.repair.config import RepairConfig
    from agentflow.repair.verify.workbench import Workbench
    from agentflow.swe.tasks import SWETask

    sandbox = await _start(backend, tmp_path)
    try:
        task = SWETask(instance_id="t-1", repo="o/r", base_commit="HEAD", FAIL_TO_PASS=[])
        bench = Workbench(sandbox, task, RepairConfig(), "python3")
        shared = SharedSandbox(sandbox)
        view = bench.on(BranchSandbox(shared, await shared.snapshot()))
        for holder in (bench, view):
            async with holder.lock:
                await holder.sandbox.exec(f"{leave(how, JOB)}\n{STARTED}")
                if holder is bench:
                    assert await _left(sandbox) >= 1  # the job runs while the rollout holds the sandbox
            assert await _left(sandbox) == 0
    finally:
        await sandbox.close()
