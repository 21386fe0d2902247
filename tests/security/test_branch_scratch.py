"""Search branches share no file outside the workspace: every place a command can write is a branch's own.

Branches of a search take turns in one sandbox (graph/search/workspace.py). Besides the workspace, a command can
keep files in the container's scratch places (`/tmp`, which is HOME and TMPDIR, and `/dev/shm`) and, until this
change, in the snapshot index and store themselves. A file one branch left there (a `sitecustomize.py` on a
path, a cache, a fake snapshot object) was in the next branch's view. The places are not listed by hand here:
the walk below finds, inside the real container and as the command user, every folder that user can write, and
for each one:
- the backend names it as a scratch place (kept with the branch) or a wiped place (emptied at each switch), or it
  is the workspace (`test_every_writable_place_is_the_workspace_or_a_scratch_place`);
- branch A plants a file and a module there; branch B's view of the place is what B left (or empty for a wiped
  place), B's Python does not import A's module, and B's own file there survived A's turn
  (`test_a_file_a_branch_leaves_outside_the_workspace_is_in_no_other_branchs_view`);
- the snapshot index and store are in no command's reach: every path in them refuses to be listed, read or
  written, so a branch cannot plant a fake snapshot object, and B's snapshot restores as B took it
  (`test_the_snapshot_store_is_out_of_every_commands_reach`).
The local backend keeps the scratch folder it gives commands (HOME, TMPDIR, the XDG folders) per branch; it
cannot keep them from writing anywhere else the user can (docs/security.md).
"""

from __future__ import annotations

import json
import shlex
import warnings
from typing import Any

import pytest

from agentflow.graph.search.workspace import BranchSandbox, SandboxTurn, SharedSandbox
from agentflow.sandbox import start_sandbox
from agentflow.sandbox.config import SandboxConfig
from agentflow.sandbox.docker import SCRATCH_PLACES, STORE_DIR, WIPED_PLACES
from agentflow.sandbox.local import LocalBackendWarning

# Every folder the running user can create a file in, found by walking the whole filesystem (/proc, which holds
# kernel interfaces rather than files, aside); only the topmost of nested ones.
WALK = r"""
import json, os
found = []
for top, dirs, _ in os.walk('/', onerror=lambda e: None):
    if top == '/proc':
        dirs[:] = []
        continue
    if os.access(top, os.W_OK | os.X_OK) and not any(top.startswith(f.rstrip('/') + '/') for f in found):
        found.append(top)
print(json.dumps(found))
"""

PLANT = "agentflow_plant"
"""A module a branch leaves in a place: another branch's Python, with the place on its path, must not import it."""

# What a branch sees of a place: each entry's name and content (a message queue's reads as its status line).
VIEW = r"""
import json, os, sys
place = sys.argv[1]
seen = {}
for name in sorted(os.listdir(place)):
    try:
        with open(os.path.join(place, name), 'rb') as fh:
            seen[name] = fh.read(200).decode('utf-8', 'replace')
    except OSError as exc:
        seen[name] = type(exc).__name__
sys.path.insert(0, place)
try:
    __import__('PLANT')
    imported = True
except ImportError:
    imported = False
except BaseException:  # found and run (it exits, or is not Python at all)
    imported = True
print(json.dumps({'seen': seen, 'imported': imported}))
""".replace("PLANT", PLANT)


async def _run(sandbox: Any, script: str, *args: str) -> Any:
    res = await sandbox.exec(f"python3 -c {shlex.quote(script)} {' '.join(shlex.quote(a) for a in args)}")
    assert res.ok, res.output
    return json.loads(res.stdout.strip().splitlines()[-1])


def _plant(place: str, who: str) -> str:
    """Shell that leaves `who`'s file and module in `place` (a place that cannot hold a module keeps the name)."""
    return (
        f"echo {who} > {place}/{who}-was-here; "
        f"printf 'raise SystemExit(\"{who} planted\")\\n' > {place}/{PLANT}.py 2>/dev/null || touch {place}/{PLANT}.py; "
        "true"
    )


@pytest.fixture
async def docker_sandbox(docker_image: str) -> Any:
    sandbox = await start_sandbox("docker", SandboxConfig(image=docker_image))
    try:
        yield sandbox
    finally:
        await sandbox.close()


async def _writable_places(sandbox: Any) -> list[str]:
    places: list[str] = await _run(sandbox, WALK)
    return places


@pytest.mark.docker
async def test_every_writable_place_is_the_workspace_or_a_scratch_place(docker_sandbox: Any) -> None:
    places = await _writable_places(docker_sandbox)
    assert "/tmp" in places, places  # the walk sees what it must (it is not vacuous)
    named = {docker_sandbox.workdir, *SCRATCH_PLACES, *WIPED_PLACES}
    assert set(places) <= named, f"writable places nobody keeps per branch: {sorted(set(places) - named)}"


@pytest.mark.docker
async def test_a_file_a_branch_leaves_outside_the_workspace_is_in_no_other_branchs_view(docker_sandbox: Any) -> None:
    places = [p for p in await _writable_places(docker_sandbox) if p != docker_sandbox.workdir]
    assert places
    shared = SharedSandbox(docker_sandbox)
    first = BranchSandbox(shared, await shared.snapshot())
    second = BranchSandbox(shared, first.snapshot_id)
    wrong = []
    for place in places:
        await second.exec(f"echo b > {place}/b-own-file; true")
        before = await _run(second, VIEW, place)
        await first.exec(_plant(place, "a"))
        planted = await _run(first, VIEW, place)
        assert "a-was-here" in planted["seen"], (place, planted)  # A's file is there in A's own view
        after = await _run(second, VIEW, place)
        expected = {"seen": {}, "imported": False} if place in WIPED_PLACES else before
        if after != expected:
            wrong.append((place, before, after))
        # and A's own view is still its own after B's turn
        again = await _run(first, VIEW, place)
        if place not in WIPED_PLACES and again != planted:
            wrong.append((place, planted, again))
    assert not wrong, ([w[0] for w in wrong], wrong)


STORE_PLACES = ("/run/agentflow", STORE_DIR)

# As the command user: every way at the paths the store holds, and a fake object planted in each folder.
PROBE = r"""
import json, os, sys
paths = json.loads(sys.argv[1])
reached = []
for path in paths:
    for what, act in (
        ('list', lambda p: os.listdir(p)),
        ('read', lambda p: open(p, 'rb').read(1)),
        ('write', lambda p: open(p, 'ab').close()),
        ('plant', lambda p: open(os.path.join(p, 'fake-object'), 'wb').close()),
        ('chmod', lambda p: os.chmod(p, 0o777)),
    ):
        try:
            act(path)
        except (PermissionError, NotADirectoryError, IsADirectoryError):
            continue
        except OSError as exc:
            reached.append([path, what, type(exc).__name__])
            continue
        reached.append([path, what, 'ok'])
print(json.dumps(reached))
"""


@pytest.mark.docker
async def test_the_snapshot_store_is_out_of_every_commands_reach(docker_sandbox: Any) -> None:
    sandbox = docker_sandbox
    shared = SharedSandbox(sandbox)
    first = BranchSandbox(shared, await shared.snapshot())
    second = BranchSandbox(shared, first.snapshot_id)
    await second.exec("mkdir -p src && echo 'VALUE = 2' > src/mod.py")
    await first.exec("echo 'VALUE = 1' > other.py")
    # every path the index and store hold now (listed by the snapshot operations' own identity)
    listing = await sandbox._exec(f"find {' '.join(STORE_PLACES)}", store=True)
    paths = listing.stdout.split()
    assert len(paths) > 20 and any("/objects/" in p for p in paths), listing.output
    reached = await _run(first, PROBE, json.dumps(paths))
    assert reached == [], reached[:20]
    # B's snapshot restores as B took it, and its check passes
    result = await second.exec("python3 -c 'import sys; sys.path.insert(0, \"src\"); import mod; assert mod.VALUE == 2'")
    assert result.ok, result.output
    assert await second.read_file("src/mod.py") == "VALUE = 2\n"


@pytest.mark.parametrize("backend", [pytest.param("docker", marks=pytest.mark.docker), "local"])
async def test_a_turns_files_outside_the_workspace_are_gone_with_its_turn(backend: str) -> None:
    """Rollouts taking turns in one sandbox (`SandboxTurn`): the next holder finds the scratch places as they
    were before the first turn."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LocalBackendWarning)
        sandbox = await start_sandbox(backend, SandboxConfig())
    try:
        await sandbox.exec('echo kept > "$TMPDIR/before"')
        turn = SandboxTurn(sandbox)
        async with turn:
            await sandbox.exec(_plant('"$TMPDIR"', "a") + '; mkdir -p "$HOME/.config" && echo a > "$HOME/.config/x"')
        async with turn:
            seen = await sandbox.exec('ls -A "$TMPDIR" "$HOME"')
        assert "a-was-here" not in seen.stdout and PLANT not in seen.stdout and ".config" not in seen.stdout
        assert "before" in seen.stdout, seen.output
    finally:
        await sandbox.close()


async def test_the_local_scratch_folder_is_each_branchs_own() -> None:
    """The local backend's commands get HOME, TMPDIR and the XDG folders in its scratch folder, which each
    branch keeps as its own (the rest of the machine is not in its care: it is not a security boundary)."""
    with pytest.warns(LocalBackendWarning):
        sandbox = await start_sandbox("local", SandboxConfig())
    try:
        shared = SharedSandbox(sandbox)
        first = BranchSandbox(shared, await shared.snapshot())
        second = BranchSandbox(shared, first.snapshot_id)
        homes = (await second.exec('echo "$HOME $TMPDIR $XDG_CACHE_HOME $XDG_CONFIG_HOME"')).stdout.split()
        assert all(h.startswith(str(sandbox.root / "scratch")) for h in homes), homes
        for var in ("HOME", "TMPDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
            await second.exec(f'mkdir -p "${var}" && echo b > "${var}/b-{var}"')
            await first.exec(f'mkdir -p "${var}" && ' + _plant(f'"${var}"', "a"))
            seen = await second.exec(f'ls -A "${var}"')
            assert "a-was-here" not in seen.stdout and PLANT not in seen.stdout, (var, seen.output)
            assert f"b-{var}" in seen.stdout, (var, seen.output)
    finally:
        await sandbox.close()
