"""Bringing a model-made patch into the user's own working tree (`repair --apply`), safely.

The patch comes out of a sandbox, so it is untrusted: before anything is written, the host checks every
file it names. Refused, with a one-line reason: paths that are absolute, climb out with `..`, or lie under
`.git/` (a hook there runs on the user's next commit); symlinks; a file made executable (unless the user
allows it); a path whose folder in the tree is a symlink, or that resolves outside the repository. Then
`git apply` writes it (a patch git refuses is not retried with a more lenient tool).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agentflow.errors import UserError
from agentflow.swe.patch import FilePatch, parse_patch

_EXEC_MODES = ("100755",)
_LINK_MODE = "120000"


@dataclass
class TreeApplication:
    """What `apply_to_tree` wrote."""

    command: str
    diffstat: str
    """`path | +N -M` per file, and a total line."""


def _new_modes(fp: FilePatch) -> list[str]:
    modes = []
    for line in fp.text.splitlines():
        for prefix in ("new file mode ", "new mode "):
            if line.startswith(prefix):
                modes.append(line[len(prefix) :].strip())
    return modes


def _renamed_paths(fp: FilePatch) -> list[str]:
    out = []
    for line in fp.text.splitlines():
        for prefix in ("rename from ", "rename to ", "copy from ", "copy to "):
            if line.startswith(prefix):
                out.append(line[len(prefix) :].strip())
    return out


def _path_problem(path: str) -> str | None:
    if not path or "\x00" in path or path.startswith("/") or "\\" in path:
        return "is not a relative path"
    parts = PurePosixPath(path).parts
    if ".." in parts:
        return "climbs out of the repository (..)"
    if ".git" in parts:
        return "is inside .git/"
    return None


def _tree_problem(repo: Path, path: str) -> str | None:
    """A reason `path` may not be written in `repo` as it is on disk (symlinked folders, links out)."""
    root = repo.resolve()
    here = repo
    for part in PurePosixPath(path).parts:
        here = here / part
        if here.is_symlink():
            return "goes through a symlink in your tree"
    target = (repo / path).resolve()
    if target != root and root not in target.parents:
        return "resolves outside the repository"
    return None


def check_patch_for_tree(repo: Path, patch: str, *, allow_exec: bool = False) -> list[FilePatch]:
    """The patch's files, or a UserError naming the first one that may not reach the user's tree."""
    parsed = parse_patch(patch)
    if parsed.problem:
        raise UserError(f"the patch cannot be applied: {parsed.problem}")
    for fp in parsed.files:
        for path in {p for p in (fp.old_path, fp.new_path, *_renamed_paths(fp)) if p}:
            why = _path_problem(path) or _tree_problem(repo, path)
            if why:
                raise UserError(f"refusing to apply the patch: {path} {why}", hint="review patch.diff in the run folder")
        modes = _new_modes(fp)
        if _LINK_MODE in modes:
            raise UserError(f"refusing to apply the patch: it makes {fp.path} a symlink", hint="review patch.diff")
        if not allow_exec and any(m in _EXEC_MODES for m in modes):
            raise UserError(
                f"refusing to apply the patch: it makes {fp.path} executable",
                hint="review patch.diff, then pass --allow-exec to allow it",
            )
    return parsed.files


def diffstat(files: list[FilePatch]) -> str:
    lines, plus, minus = [], 0, 0
    for fp in files:
        body = [ln for ln in fp.text.splitlines() if not ln.startswith(("+++ ", "--- "))]
        add = sum(1 for ln in body if ln.startswith("+"))
        rem = sum(1 for ln in body if ln.startswith("-"))
        plus, minus = plus + add, minus + rem
        lines.append(f" {fp.path} | +{add} -{rem}")
    lines.append(f" {len(files)} file(s) changed, {plus} insertion(s), {minus} deletion(s)")
    return "\n".join(lines)


def apply_to_tree(repo: str | Path, patch: str, *, allow_exec: bool = False) -> TreeApplication:
    """Check `patch` against `repo`'s working tree (see the module docstring), then `git apply` it."""
    repo = Path(repo)
    files = check_patch_for_tree(repo, patch, allow_exec=allow_exec)
    cmd = ["git", "apply", "--verbose", "-"]
    try:
        proc = subprocess.run(cmd, cwd=repo, input=patch, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise UserError("git is not installed", hint="install git, or apply patch.diff by hand") from None
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ["git apply failed"])[-1]
        raise UserError(
            f"the patch does not apply to {repo}'s working tree: {reason}",
            hint="the tree changed since the run; apply patch.diff by hand",
        )
    return TreeApplication(command="git apply", diffstat=diffstat(files))
