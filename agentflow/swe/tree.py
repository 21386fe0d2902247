"""Bringing a model-made patch into the user's own working tree (`repair --apply`), safely.

The patch comes out of a sandbox, so it is untrusted, and the host never reads it with a parser of its own
(one that disagrees with git about modes or line ends would check one patch while git writes another).
git itself says what the patch does:

1. `git apply --numstat -z` (and `-R`, for the old names of renames) lists every file git would touch;
   each name is refused if it is absolute, climbs out with `..`, lies under `.git/` (a hook there runs
   on the user's next commit), or goes through a symlink / resolves outside the repository in the tree.
2. Those files are copied from the tree into a scratch repository (no user config, hooks or filters) and
   the same bytes are applied there with the same `git apply`; the RESULT is inspected on disk: refused
   when it holds a symlink, or a file made executable (unless the user allows it), or a changed file
   git's own list left out.
3. Only then does `git apply` write the user's tree (a patch git refuses is not retried with a more
   lenient tool). The diffstat shown is git's list, so it names every file that is written.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agentflow.errors import UserError
from agentflow.swe.hostgit import safe_env
from agentflow.swe.patch import FileChange, UnreadablePatch, pair_numstat, parse_numstat

_APPLY = ["apply", "--verbose", "-"]
_NO_HOOKS = ["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"]
_SCRATCH_CONFIG = [
    *_NO_HOOKS,
    *("-c", "core.symlinks=true", "-c", "core.fileMode=true", "-c", "core.autocrlf=false"),
    *("-c", "core.protectHFS=true", "-c", "core.protectNTFS=true"),
]
"""The scratch repository writes symlinks and modes as they are, so the inspection sees them."""
_LOCAL_GIT_ENV = frozenset({
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE",
    "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_PREFIX", "GIT_SHALLOW_FILE",
    "GIT_COMMON_DIR",
})
"""`git rev-parse --local-env-vars`: these would point `git apply` at another tree than the one checked."""
_State = tuple[str, bool, bytes]
"""A path on disk: kind ("file", "link", "other"), executable, digest of the content or link target."""


@dataclass
class TreeApplication:
    """What `apply_to_tree` wrote."""

    command: str
    diffstat: str
    """`path | +N -M` per file (as git lists them), and a total line."""


def _git(args: list[str], cwd: Path, env: dict[str, str], data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", *args], cwd=cwd, env=env, input=data, capture_output=True, check=False)
    except FileNotFoundError:
        raise UserError("git is not installed", hint="install git, or apply patch.diff by hand") from None


def _reason(proc: subprocess.CompletedProcess[bytes]) -> str:
    return (proc.stderr.decode(errors="replace").strip().splitlines() or ["git apply failed"])[-1]


def _does_not_apply(repo: Path, proc: subprocess.CompletedProcess[bytes]) -> UserError:
    return UserError(
        f"the patch does not apply to {repo}'s working tree: {_reason(proc)}",
        hint="the tree changed since the run; apply patch.diff by hand",
    )


def _numstat(patch: bytes, cwd: Path, env: dict[str, str], *, reverse: bool) -> list[tuple[str, str, str]]:
    proc = _git([*_SCRATCH_CONFIG, "apply", "--numstat", "-z", *(["-R"] if reverse else []), "-"], cwd, env, patch)
    if proc.returncode != 0:
        raise UserError(f"the patch cannot be applied: {_reason(proc)}", hint="review patch.diff in the run folder")
    return parse_numstat(proc.stdout)


def patch_files(patch: bytes, cwd: Path, env: dict[str, str]) -> list[FileChange]:
    """The files `git apply` would touch, in patch order, both ends of renames (`swe.patch.pair_numstat`)."""
    try:
        return pair_numstat(_numstat(patch, cwd, env, reverse=False), _numstat(patch, cwd, env, reverse=True))
    except UnreadablePatch as exc:
        raise UserError(f"the patch cannot be applied: {exc}") from None


def _path_problem(path: str) -> str | None:
    if not path or "\x00" in path or path.startswith("/") or "\\" in path:
        return "is not a relative path"
    parts = PurePosixPath(path).parts
    if ".." in parts:
        return "climbs out of the repository (..)"
    # case and trailing dots/spaces: what a case-insensitive or Windows file system would call .git
    if any(part.lower().rstrip(". ") in (".git", "git~1") for part in parts):
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


def _copy_preimage(repo: Path, scratch: Path, path: str) -> None:
    """Put `path` (and whatever stands where its folders would go) into `scratch` as it is in `repo`."""
    parts = PurePosixPath(path).parts
    for depth in range(1, len(parts) + 1):
        rel = Path(*parts[:depth])
        src, dst = repo / rel, scratch / rel
        if not os.path.lexists(src):
            return
        if src.is_dir():  # not a symlink: `_tree_problem` ran first
            dst.mkdir(exist_ok=True)
            continue
        if not src.is_file():
            raise UserError(f"refusing to apply the patch: {rel.as_posix()} is not a regular file in your tree")
        if not os.path.lexists(dst):
            shutil.copy2(src, dst)  # a file where git expects a folder: git then fails here as in the tree
        return


def _state(path: Path) -> _State:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return ("link", False, hashlib.sha256(os.fsencode(os.readlink(path))).digest())
    if stat.S_ISREG(st.st_mode):
        return ("file", bool(st.st_mode & 0o111), hashlib.sha256(path.read_bytes()).digest())
    return ("other", False, b"")


def _snapshot(tree: Path) -> dict[str, _State]:
    """Every non-folder entry under `tree` (not its .git/), symlinks not followed."""
    out = {}
    for root, dirs, files in os.walk(tree):
        if Path(root) == tree and ".git" in dirs:
            dirs.remove(".git")
        for name in [*dirs, *files]:
            full = Path(root) / name
            if full.is_symlink() or not full.is_dir():
                out[full.relative_to(tree).as_posix()] = _state(full)
    return out


def _result_problem(path: str, before: _State | None, after: _State | None, allow_exec: bool) -> UserError | None:
    if after is None:
        return None
    if after[0] == "link":
        return UserError(f"refusing to apply the patch: it makes {path} a symlink", hint="review patch.diff")
    if after[0] != "file":
        return UserError(f"refusing to apply the patch: it makes {path} a special file", hint="review patch.diff")
    if after[1] and not allow_exec and not (before and before[0] == "file" and before[1]):
        return UserError(
            f"refusing to apply the patch: it makes {path} executable",
            hint="review patch.diff, then pass --allow-exec to allow it",
        )
    return None


def _inspect(scratch: Path, before: dict[str, _State], files: list[FileChange], allow_exec: bool) -> set[str]:
    """Refuse what git wrote into `scratch`; return the paths it made executable."""
    after = _snapshot(scratch)
    listed = {p for fc in files for p in (fc.old_path, fc.new_path)}
    made_exec = set()
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        if path not in listed:
            raise UserError(f"refusing to apply the patch: git writes {_shown(path)}, which its file list leaves out")
        problem = _result_problem(_shown(path), old, new, allow_exec)
        if problem:
            raise problem
        if new and new[1] and not (old and old[1]):
            made_exec.add(path)
    return made_exec


def check_patch_for_tree(repo: Path, patch: str, *, allow_exec: bool = False) -> tuple[list[FileChange], set[str]]:
    """The patch's files and those it makes executable, or a UserError naming the first one that may not
    reach the user's tree. Decided by applying the patch with git to a scratch copy (see the module doc)."""
    data = _encode(patch)
    with tempfile.TemporaryDirectory(prefix="agentflow-apply-") as tmp:
        env = safe_env({"GIT_CEILING_DIRECTORIES": tmp})  # the scratch repository knows no config of anyone's
        scratch = Path(tmp) / "tree"
        init = _git(["init", "-q", "--template=", str(scratch)], Path(tmp), env)
        if init.returncode != 0:
            raise UserError(f"cannot make a scratch repository to check the patch: {_reason(init)}")
        files = patch_files(data, scratch, env)
        for path in sorted({p for fc in files for p in (fc.old_path, fc.new_path)}):
            why = _path_problem(path) or _tree_problem(repo, path)
            if why:
                raise UserError(f"refusing to apply the patch: {_shown(path)} {why}", hint="review patch.diff in the run folder")
            _copy_preimage(repo, scratch, path)
        before = _snapshot(scratch)
        proc = _git([*_SCRATCH_CONFIG, *_APPLY], scratch, env, data)
        if proc.returncode != 0:
            raise _does_not_apply(repo, proc)
        return files, _inspect(scratch, before, files, allow_exec)


def _encode(patch: str) -> bytes:
    try:
        return patch.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise UserError("the patch cannot be applied: it is not UTF-8 text", hint="review patch.diff") from None


def _shown(path: str) -> str:
    """`path` for a terminal: control and invisible characters escaped (no line breaks, colours, bidi)."""
    return path if path.isprintable() else path.encode("unicode_escape").decode("ascii")


def diffstat(files: list[FileChange], made_exec: set[str] | frozenset[str] = frozenset()) -> str:
    lines, plus, minus = [], 0, 0
    for fc in files:
        name = _shown(fc.new_path) if fc.old_path == fc.new_path else f"{_shown(fc.old_path)} => {_shown(fc.new_path)}"
        counts = "binary" if "-" in (fc.added, fc.deleted) else f"+{fc.added} -{fc.deleted}"
        if counts != "binary":
            plus, minus = plus + int(fc.added), minus + int(fc.deleted)
        lines.append(f" {name} | {counts}" + (" (executable)" if fc.new_path in made_exec else ""))
    lines.append(f" {len(files)} file(s) changed, {plus} insertion(s), {minus} deletion(s)")
    return "\n".join(lines)


def apply_to_tree(repo: str | Path, patch: str, *, allow_exec: bool = False) -> TreeApplication:
    """Check `patch` against `repo`'s working tree (see the module docstring), then `git apply` it."""
    repo = Path(repo)
    files, made_exec = check_patch_for_tree(repo, patch, allow_exec=allow_exec)
    env = {k: v for k, v in os.environ.items() if k not in _LOCAL_GIT_ENV}
    # git looks no higher than `repo` for a repository: inside an enclosing one (a subfolder, a dotfiles
    # repo in $HOME) it would read the paths from that one's top, not from `repo` as checked above
    env["GIT_CEILING_DIRECTORIES"] = str(repo.resolve().parent)
    proc = _git([*_NO_HOOKS, *_APPLY], repo, env, _encode(patch))
    if proc.returncode != 0:
        raise _does_not_apply(repo, proc)
    return TreeApplication(command="git apply", diffstat=diffstat(files, made_exec))
