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
- the workspace's own `.git` folder, which the workspace snapshot leaves out, is kept per branch too: every path
  in it the command user can change, changed by branch A along with the hooks, config keys and attributes filter
  git runs commands from, is not in B's view and runs in none of B's git commands, and A's is back on A's turn
  (`test_what_a_branch_writes_in_the_workspaces_git_folder_is_in_no_other_branchs_git`, and for a `.git` replaced,
  closed or made, `test_a_git_folder_a_branch_replaces_or_makes_is_not_the_next_branchs`);
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


# The workspace's own `.git` folder: every path in it the command user can change (writable, or its own to
# make writable), found by walking it as that user, each changed by branch A at once; A also plants what git runs
# commands from (hooks, config keys, an attributes filter). B's view of `.git` and what B's git runs are B's own.
GIT_WALK = r"""
import json, os
found = []
for top, dirs, files in os.walk('.git'):
    for name in [*dirs, *files]:
        full = os.path.join(top, name)
        if os.access(full, os.W_OK) or os.lstat(full).st_uid == os.getuid():
            found.append(full)
print(json.dumps(found))
"""

# A's change to each path: a folder gets a new file, a file gets a line more (made writable first, as its owner can).
GIT_CHANGE = r"""
import json, os, sys
for path in json.loads(sys.argv[1]):
    if os.path.isdir(path):
        with open(os.path.join(path, 'a-was-here'), 'w') as fh:
            fh.write('a\n')
    else:
        os.chmod(path, os.stat(path).st_mode | 0o200)
        with open(path, 'a') as fh:
            fh.write('\n# a was here\n')
print(json.dumps(True))
"""

# Each file and link under `.git` (folders show through what they hold: git keeps no empty folder, so an empty
# one is not kept, nor left behind): its content (a link's target), and whether it is executable.
GIT_VIEW = r"""
import hashlib, json, os
seen = {}
for top, dirs, files in os.walk('.git'):
    for name in [*dirs, *files]:
        full = os.path.join(top, name)
        if os.path.islink(full):
            seen[full] = 'link ' + os.readlink(full)
        elif os.path.isdir(full):
            continue
        else:
            with open(full, 'rb') as fh:
                seen[full] = hashlib.sha256(fh.read()).hexdigest() + (' x' if os.access(full, os.X_OK) else '')
print(json.dumps(seen))
"""

RAN = "agentflow-git-ran"
"""The prefix of the files a planted git command leaves in the running branch's TMPDIR (its own scratch place)."""

HOOKS = ("pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-checkout", "post-index-change")


def _plant_git_commands() -> str:
    """Shell that makes git run a command of A's from each kind of place in `.git` a command can come from."""
    ran = f'"${{TMPDIR:-/tmp}}/{RAN}'
    hooks = " ".join(
        f"printf '#!/bin/sh\\ntouch {ran}-hook-{hook}\"\\n' > .git/hooks/{hook} && chmod +x .git/hooks/{hook} &&"
        for hook in HOOKS
    )
    config = {
        "core.fsmonitor": f"touch {ran}-fsmonitor\"; false",
        "alias.st": f"!touch {ran}-alias\"",
        "filter.a.clean": f"touch {ran}-clean\"; cat",
        "filter.a.smudge": f"touch {ran}-smudge\"; cat",
        "diff.a.textconv": f"sh -c 'touch {ran}-textconv\"; cat \"$1\"' -",
        "diff.external": f"sh -c 'touch {ran}-diff-external\"' -",
    }
    settings = " ".join(f"git config {shlex.quote(k)} {shlex.quote(v)} &&" for k, v in config.items())
    return f"{hooks} {settings} printf '* filter=a diff=a\\n' > .git/info/attributes"


# What the next branch does with git in its workspace: each runs a command from one of the places above.
USE_GIT = (
    "git status >/dev/null; git st; echo more >> f; git diff >/dev/null; git diff --no-ext-diff >/dev/null; git add -A; "
    "git -c user.name=b -c user.email=b@b commit -qm b; git checkout -q HEAD~1 2>/dev/null; git checkout -q -; "
    f'ls "${{TMPDIR:-/tmp}}" | grep {RAN} | sort; true'
)


async def _start(backend: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LocalBackendWarning)
        return await start_sandbox(backend, SandboxConfig())


@pytest.mark.parametrize("backend", [pytest.param("docker", marks=pytest.mark.docker), "local"])
async def test_what_a_branch_writes_in_the_workspaces_git_folder_is_in_no_other_branchs_git(backend: str) -> None:
    sandbox = await _start(backend)
    try:
        init = await sandbox.exec(
            "git init -q && echo one > f && git add f && git -c user.name=m -c user.email=m@m commit -qm one"
        )
        assert init.ok, init.output
        shared = SharedSandbox(sandbox)
        first = BranchSandbox(shared, await shared.snapshot())
        second = BranchSandbox(shared, first.snapshot_id)
        before = await _run(second, GIT_VIEW)
        planted = await first.exec(_plant_git_commands())
        assert planted.ok, planted.output
        ran_in_a = (await first.exec(USE_GIT)).stdout.split()
        # the plants are live: A's own git runs each kind of them
        for kind in ("hook-pre-commit", "fsmonitor", "alias", "clean", "diff-external"):
            assert f"{RAN}-{kind}" in ran_in_a, (kind, ran_in_a)
        paths = await _run(first, GIT_WALK)
        assert ".git/config" in paths and ".git/hooks/pre-commit" in paths, paths  # the walk sees what it must
        await _run(first, GIT_CHANGE, json.dumps(paths))
        a_view = await _run(first, GIT_VIEW)
        after = await _run(second, GIT_VIEW)
        assert after == before, {p: (before.get(p), after.get(p)) for p in {*before, *after} if before.get(p) != after.get(p)}
        ran_in_b = (await second.exec(USE_GIT)).stdout.split()
        assert ran_in_b == [], ran_in_b
        # and A's `.git` is A's own again when its turn comes back
        assert await _run(first, GIT_VIEW) == a_view
    finally:
        await sandbox.close()


@pytest.mark.parametrize("backend", [pytest.param("docker", marks=pytest.mark.docker), "local"])
async def test_a_git_folder_a_branch_replaces_or_makes_is_not_the_next_branchs(backend: str) -> None:
    """A replaces the workspace's `.git` by a link to a git folder of its own, or by a file; B's `.git` is its
    own. And a `.git` a branch makes in a workspace that had none is gone in the next branch's."""
    sandbox = await _start(backend)
    try:
        assert (await sandbox.exec("git init -q && git config user.name m")).ok
        shared = SharedSandbox(sandbox)
        first = BranchSandbox(shared, await shared.snapshot())
        second = BranchSandbox(shared, first.snapshot_id)
        before = await _run(second, GIT_VIEW)
        for replace in (
            'cp -r .git "$TMPDIR/own" && git --git-dir="$TMPDIR/own" config user.name a && rm -rf .git && ln -s "$TMPDIR/own" .git',
            'rm -rf .git && echo "gitdir: $TMPDIR/own" > .git',
            "chmod -R a-w .git && chmod 0 .git",
            # a closed file: git keeps the index entry of a file it cannot read (its old content)
            "git config user.name a && chmod 0 .git/config",
        ):
            other = BranchSandbox(shared, first.snapshot_id)
            assert (await other.exec(replace)).ok, replace
            assert await _run(second, GIT_VIEW) == before, replace
            assert (await second.exec("git config user.name")).stdout.strip() == "m"
        assert (await second.exec("rm -rf .git")).ok
        third = BranchSandbox(shared, second.snapshot_id)
        assert (await third.exec("git init -q && git config user.name c")).ok
        assert (await second.exec("test -e .git || echo none")).stdout.strip() == "none"
        assert (await third.exec("git config user.name")).stdout.strip() == "c"
    finally:
        await sandbox.close()
