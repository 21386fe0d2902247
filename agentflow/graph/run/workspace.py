"""The sandbox a workflow's agents act in, holding a copy of the user's workspace.

    async with open_workspace("docker", "path/to/repo", events=log) as sb:
        ctx = RunHandles(sandbox=sb, ...)
        ...                                   # agents edit and test the copy inside the sandbox
        patch = await sb.diff()               # what they changed, as a unified diff

The same backends and rules as `repair`: docker by default, `auto` needs Docker too, `local` (not a security
boundary) only when asked for by name. The workspace is copied in without its `.git`; nothing comes back
to the host unless the caller applies the diff (the CLI's `run --apply` checks it first, as repair does).

A run keeps the workspace it started from (`WorkspaceBase`: each file's digest, and the diffs since applied to
the folder). A fork starts from that same workspace: a folder that has since had the run's diff applied is
taken back to it (the applied diffs reversed in the copy), and one that changed otherwise is refused, since
the recorded changes were made on, and only apply to, the start.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentflow.errors import UserError
from agentflow.graph.run.ledger import WorkspaceBase

if TYPE_CHECKING:
    from agentflow.graph.define.spec import WorkflowSpec
    from agentflow.sandbox.session import AgentSandbox

SANDBOX_PACKS = frozenset({"shell", "editor", "search", "tests", "patch"})
"""Built-in tool packs whose tools act on the run's sandbox."""

SANDBOX_CHOICES = ("docker", "local", "auto", "none")


def agent_packs(spec: WorkflowSpec) -> set[str]:
    """Tool packs of the workflow and of every agent node in it (subgraphs included)."""
    from agentflow.graph.compile.agent_nodes import node_options

    packs = set(spec.tools)
    for name, node in spec.nodes.items():
        if node.agent is not None:
            from agentflow.agents.roles import load_agent_config

            try:
                options = node_options(name, node)
                overrides = [f"{k}={v}" for k, v in options.config.items() if k == "tools"]
                packs.update(load_agent_config(node.agent, overrides).tools)
            except UserError:
                continue  # validation reports it
        sub = node.subgraph
        if sub is not None and not isinstance(sub, (str, dict)):
            packs |= agent_packs(sub)
    return packs


def needs_sandbox(spec: WorkflowSpec) -> bool:
    """True when a node or agent of `spec` uses a tool pack that acts on a sandbox, or a typed node's type
    runs code in one (`NodeType.sandbox`)."""
    return bool(agent_packs(spec) & SANDBOX_PACKS) or _typed_needs_sandbox(spec)


def _typed_needs_sandbox(spec: WorkflowSpec) -> bool:
    if not any(node.type for node in spec.nodes.values()):
        return False
    from agentflow.graph.compile.compiler import registry_for
    from agentflow.graph.compile.nodetypes import typed_nodes

    try:
        registry = registry_for(spec)
    except UserError:
        return False  # validation reports it
    return any(t.sandbox for t in typed_nodes(spec, registry))  # a search node's rollout included


def choose_backend(requested: str | None, spec: WorkflowSpec, workspace: str | Path | None) -> str | None:
    """The sandbox backend of a run: the one asked for; else docker when the workflow's tools need one or a
    workspace is given; else None (no sandbox). `none` refuses a sandbox, which a workspace contradicts."""
    if requested is not None and requested not in SANDBOX_CHOICES:
        raise UserError(f"unknown sandbox {requested!r}", hint=f"use one of {', '.join(SANDBOX_CHOICES)}")
    if requested == "none":
        if workspace is not None:
            raise UserError("--workspace needs a sandbox", hint="drop '--sandbox none' or --workspace")
        return None
    if requested is not None:
        return requested
    return "docker" if workspace is not None or needs_sandbox(spec) else None


GENERATED = (".pytest_cache", "__pycache__", ".mypy_cache", ".ruff_cache")
"""Folders tools write as a side effect (a test run's caches): never part of a run's changes."""


def _generated(path: str) -> bool:
    return any(part in GENERATED for part in path.split("/")) or path.endswith(".pyc")


def without_generated(diff: str) -> str:
    """`diff` without the file sections of caches and bytecode, ending in a newline (as `git apply` needs)."""
    text = "".join(section for section in re.split(r"(?m)^(?=diff --git )", diff)
                   if not ((match := re.match(r"diff --git a/(\S+) b/(\S+)", section))
                           and (_generated(match.group(1)) or _generated(match.group(2)))))
    return text if not text or text.endswith("\n") else text + "\n"


async def workspace_diff(sb: Any) -> str:
    """What changed in the sandbox's workspace since its base, caches left out."""
    return without_generated(str(await sb.diff()))


def folder_digest(folder: Path) -> dict[str, str]:
    """Path -> sha256 of each file under `folder` (a symlink: of its target's name), as the sandbox gets it."""
    files: dict[str, str] = {}
    for root, dirs, names in os.walk(folder):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = Path(root) / name
            data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
            files[path.relative_to(folder).as_posix()] = hashlib.sha256(data).hexdigest()
    return files


def _changed(files: dict[str, str], base: dict[str, str]) -> list[str]:
    return sorted(p for p in files.keys() | base.keys() if files.get(p) != base.get(p))


def _back_to_base(copy: Path, base: WorkspaceBase, workspace: Path) -> None:
    """Make `copy` (of `workspace`) the workspace `base` records: as it is, or with the diffs applied to the
    folder since reversed, newest first. A one-line UserError when it cannot be."""
    assert base.files is not None
    for patch in [None, *reversed(base.applied)]:
        if patch is not None:
            undo = subprocess.run(["git", "apply", "-R", "--whitespace=nowarn", "-"], cwd=copy, input=patch.encode(),
                                  capture_output=True, check=False,
                                  env={**os.environ, "GIT_CEILING_DIRECTORIES": str(copy.parent)})  # no repo above
            if undo.returncode != 0:
                break
        if not _changed(folder_digest(copy), base.files):
            return
    changed = _changed(folder_digest(copy), base.files)
    raise UserError(
        f"workspace {workspace} changed since the run started ({len(changed)} files differ: "
        f"{', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''}); its recorded changes apply only there",
        hint="put the folder back as the run found it (e.g. git stash), or give a copy of it as it was: "
        "--workspace COPY")


def check_workspace(workspace: str | Path) -> Path:
    """The workspace folder; a one-line UserError when it is not one (checked before a run creates anything
    and again when the sandbox loads it)."""
    src = Path(workspace)
    if not src.is_dir():
        raise UserError(f"workspace {src} is not a directory", hint="pass --workspace DIR with an existing folder")
    return src


@contextlib.contextmanager
def _copy_of(workspace: str | Path, base: WorkspaceBase | None, ignore: Iterable[str] = ()) -> Iterator[Path]:
    """A temporary copy of the host folder `workspace` (without .git). With `base`, the copy is that recorded
    workspace (see `_back_to_base`), or, when its files are not known yet, they are filled in from the copy."""
    src = check_workspace(workspace)
    with tempfile.TemporaryDirectory(prefix="agentflow-ws-") as tmp:
        copy = Path(tmp) / "ws"
        shutil.copytree(src, copy, symlinks=True, ignore=shutil.ignore_patterns(".git", *GENERATED, *ignore))
        if base is not None and base.files is None:
            base.files = folder_digest(copy)
        elif base is not None:
            _back_to_base(copy, base, src)
        yield copy


def check_recorded_start(workspace: str | Path, base: WorkspaceBase | None) -> None:
    """A one-line UserError when `workspace` cannot be made the workspace a run recorded as its start (`base`;
    see `_back_to_base`): checked before a fork creates its run folder, and again as its sandbox loads it."""
    if base is not None and base.files is not None:
        with _copy_of(workspace, base):
            pass


async def load_workspace(sb: AgentSandbox, workspace: str | Path, *, ignore: Iterable[str] = (),
                         base: WorkspaceBase | None = None) -> int:
    """Copy the host folder `workspace` (without .git; with `base`, see `_copy_of`) into the sandbox's working
    directory."""
    with _copy_of(workspace, base, ignore) as copy:
        return await sb.upload(copy, ".")


async def replay(sb: Any, diff: str, *, reset: bool = False) -> None:
    """Apply a run's recorded changes `diff` to the sandbox's workspace; with `reset`, on the workspace as it
    was at its base (a fork's sandbox that already ran something). A one-line UserError when they do not apply
    (the workspace folder changed since the run)."""
    if reset and getattr(sb, "base", None) is not None:
        await sb.restore(sb.base)
    if diff:
        res = await sb.apply_patch(diff)
        if not res.ok:
            files = sorted(set(re.findall(r"(?m)^error: (\S+): (?:already exists|patch does not apply|does not "
                                          r"exist|No such file)", res.output)))
            raise UserError(f"the run's recorded changes do not apply to the workspace ({', '.join(files) or 'git apply'}"
                            " changed since the run)",
                            hint="put the workspace folder back as the run found it, or give a copy of it as it "
                            "was: --workspace COPY")


@contextlib.asynccontextmanager
async def open_workspace(
    backend: str = "docker",
    workspace: str | Path | None = None,
    *,
    events: Any = None,
    config: Any = None,
    base: WorkspaceBase | None = None,
) -> AsyncIterator[AgentSandbox]:
    """A started sandbox holding a copy of `workspace` (empty without one; with `base`, see `load_workspace`),
    its diff base set there. Closed on exit."""
    from agentflow.sandbox import start_sandbox

    sb = await start_sandbox(backend, config, events=events)  # type: ignore[arg-type]
    try:
        if workspace is not None:
            await load_workspace(sb, workspace, base=base)
        await sb.set_base()
        yield sb
    finally:
        await sb.close()


__all__ = ["SANDBOX_CHOICES", "SANDBOX_PACKS", "agent_packs", "choose_backend", "folder_digest",
           "load_workspace", "needs_sandbox", "open_workspace", "replay", "without_generated",
           "workspace_diff"]
