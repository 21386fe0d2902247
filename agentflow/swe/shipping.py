"""Moving a task's inputs to a worker node and its outputs back (`bench` / `eval` on a remote executor).

The driver packs a local repository (and wheelhouse) once per run into the object store; a node unpacks it
(`on_this_node`) and prepares the sandbox image once (`prepare_node`). A task's files come back as text and
are written into the run directory (`write_tree`), each inside its folder, the marker file last.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentflow.config import cache_dir, file_lock
from agentflow.executors.base import Executor
from agentflow.executors.shipping import pack_dir, unpack_dir
from agentflow.executors.types import RemoteTaskError
from agentflow.runfiles import make_folder, read_inside, replace_file
from agentflow.sandbox.config import SandboxConfig
from agentflow.secrets import redact
from agentflow.swe.tasks import SWETask

__all__ = ["Shipping", "on_this_node", "prepare_node", "read_tree", "write_tree"]


class Shipping:
    """The driver's side of moving task inputs to nodes: each local directory is packed and put in the
    object store once per run; remote calls get the handles."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self._handles: dict[str, Any] = {}

    def _dir(self, path: Path) -> Any:
        key = str(path.resolve())
        if key not in self._handles:
            self._handles[key] = self.executor.share(pack_dir(path))
        return self._handles[key]

    def inputs(self, task: SWETask) -> tuple[Any, Any]:
        """Handles of the task's repository and wheelhouse directories (None for a git URL / no wheelhouse)."""
        kind, source = task.repo_source()
        repo = self._dir(Path(source)) if kind == "dir" else None
        wheels = None
        if task.wheelhouse:
            wheel_dir = task.local_path(task.wheelhouse, "wheelhouse")
            wheels = self._dir(wheel_dir) if wheel_dir.is_dir() else None
        return repo, wheels


def on_this_node(task: SWETask, repo_blob: bytes | None, wheel_blob: bytes | None) -> SWETask:
    """The task with its shipped directories unpacked on this node (absolute paths, allowed to the task: the
    driver checked the originals)."""
    update: dict[str, Any] = {}
    allowed = list(task.allowed_dirs)
    if repo_blob is not None:
        update["repo"] = str(unpack_dir(repo_blob, Path(task.repo).name or "repo"))
        allowed.append(str(Path(update["repo"]).resolve()))
    if wheel_blob is not None and task.wheelhouse:
        update["wheelhouse"] = str(unpack_dir(wheel_blob, Path(task.wheelhouse).name or "wheelhouse"))
        allowed.append(str(Path(update["wheelhouse"]).resolve()))
    return task.model_copy(update={**update, "allowed_dirs": allowed})


def prepare_node(backend: str, sandbox: SandboxConfig) -> None:
    """Build or load the sandbox image on this node on first use (one build per node: a file lock)."""
    from agentflow.sandbox import resolve_backend

    if resolve_backend(backend) != "docker":
        return
    from agentflow.sandbox.image import ensure_image, image_exists

    if image_exists(sandbox.image):
        return
    with file_lock(cache_dir() / "sandbox-image.lock"):
        ensure_image(sandbox.image)


def read_tree(root: Path) -> dict[str, str]:
    """A finished task folder's text files (its checkpoint database stays on the node: the task is done)."""
    return {str(p.relative_to(root)): read_inside(root, p) or ""  # regular files only, never through a link
            for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink() and not p.name.endswith(".tmp")
            and not p.name.startswith("checkpoints.db")}


def write_tree(root: Path, files: dict[str, str], last: str | None = None) -> None:
    """Write files under `root` (each must stay inside it); `last` is written after the others, atomically."""
    base = root.resolve()
    for rel in sorted(files, key=lambda r: r == last):
        target = root / rel
        if base not in target.resolve().parents:
            raise RemoteTaskError(f"a remote task returned a file outside its folder: {rel!r}")
        make_folder(target.parent)
        replace_file(target, redact(files[rel], urls=False))  # known secrets; patches stay. Never through a link
