"""Bringing a model-made patch into the user's own working tree (`repair --apply`, `run --apply`), safely.

The patch comes from a sandbox, so it is untrusted, and git alone says what it does: its `--numstat` list
of files is checked (no absolute path, `..`, `.git/` or symlink on the way), the patch is applied to copies
of those files in a scratch repository of ours, the result on disk is inspected (no symlink, special file,
unlisted change or, unless allowed, executable bit), and only the inspected bytes are copied into the tree.
git never runs in the user's repository, so nothing of its config, hooks or filters runs. The steps in
full: docs/security.md ("Patches that reach your tree").
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agentflow.errors import UserError, printable
from agentflow.swe.hostgit import OwnRepo, init, run_git
from agentflow.swe.patch import FileChange, UnreadablePatch, pair_numstat, parse_numstat

_APPLY = ["apply", "--verbose", "-"]
_SCRATCH_CONFIG = ("core.symlinks=true", "core.protectHFS=true", "core.protectNTFS=true")
"""The scratch repository writes symlinks and modes as they are, so the inspection sees them."""
_State = tuple[str, bool, bytes]
"""A path on disk: kind ("file", "link", "other"), executable, digest of the content or link target."""


@dataclass
class TreeApplication:
    """What `apply_to_tree` wrote."""

    command: str
    diffstat: str
    """`path | +N -M` per file (as git lists them), and a total line."""


def _git(args: list[str], scratch: OwnRepo, data: bytes) -> subprocess.CompletedProcess[bytes]:
    return run_git(args, scratch, input=data, config=_SCRATCH_CONFIG)


def _reason(proc: subprocess.CompletedProcess[bytes]) -> str:
    return (proc.stderr.decode(errors="replace").strip().splitlines() or ["git apply failed"])[-1]


def _numstat(patch: bytes, scratch: OwnRepo, *, reverse: bool) -> list[tuple[str, str, str]]:
    proc = _git(["apply", "--numstat", "-z", *(["-R"] if reverse else []), "-"], scratch, patch)
    if proc.returncode != 0:
        raise UserError(f"the patch cannot be applied: {_reason(proc)}", hint="review patch.diff in the run folder")
    return parse_numstat(proc.stdout)


def patch_files(patch: bytes, scratch: OwnRepo) -> list[FileChange]:
    """The files `git apply` would touch, in patch order, both ends of renames (`swe.patch.pair_numstat`)."""
    try:
        return pair_numstat(_numstat(patch, scratch, reverse=False), _numstat(patch, scratch, reverse=True))
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
            raise UserError(f"refusing to apply the patch: git writes {printable(path)}, which its file list leaves out")
        problem = _result_problem(printable(path), old, new, allow_exec)
        if problem:
            raise problem
        if new and new[1] and not (old and old[1]):
            made_exec.add(path)
    return made_exec


@dataclass
class _Checked:
    """A patch applied in a scratch copy and inspected: what `apply_to_tree` copies into the tree."""

    files: list[FileChange]
    made_exec: set[str]
    scratch: Path
    before: dict[str, _State]
    """The tree's files as they were copied into the scratch repository."""


@contextlib.contextmanager
def _checked(repo: Path, patch: bytes, allow_exec: bool) -> Iterator[_Checked]:
    """Apply `patch` in a scratch repository holding copies of the files it touches, and inspect the result
    (see the module doc); the scratch folder lives as long as the context."""
    with tempfile.TemporaryDirectory(prefix="agentflow-apply-") as tmp:
        scratch = init(Path(tmp) / "tree")  # a repository of ours: nobody's config, hooks or filters
        files = patch_files(patch, scratch)
        for path in _paths(files):
            why = _path_problem(path) or _tree_problem(repo, path)
            if why:
                raise UserError(f"refusing to apply the patch: {printable(path)} {why}", hint="review patch.diff in the run folder")
            _copy_preimage(repo, scratch.path, path)
        before = _snapshot(scratch.path)
        proc = _git(_APPLY, scratch, patch)
        if proc.returncode != 0:
            raise UserError(f"the patch does not apply to {repo}'s working tree: {_reason(proc)}",
                            hint="the tree changed since the run; apply patch.diff by hand")
        yield _Checked(files, _inspect(scratch.path, before, files, allow_exec), scratch.path, before)


def _paths(files: list[FileChange]) -> list[str]:
    return sorted({p for fc in files for p in (fc.old_path, fc.new_path)})


def _unchanged_since_check(repo: Path, checked: _Checked) -> None:
    """Each path the patch touches still holds what was copied out and checked (no symlink swapped in)."""
    for path in _paths(checked.files):
        full = repo / path
        now = _state(full) if os.path.lexists(full) and not full.is_dir() else None
        if _tree_problem(repo, path) or now != checked.before.get(path):
            raise UserError(f"refusing to apply the patch: {printable(path)} changed in your tree while it was checked",
                            hint="run again, or apply patch.diff by hand")


def _write_file(src: Path, dest: Path) -> None:
    """`src`'s bytes at `dest`, made beside it and renamed over it (a symlink there is replaced, never followed);
    the mode git gives a file: 0666 or 0777 less the umask."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".agentflow-apply-{os.getpid()}-{dest.name}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o777 if os.access(src, os.X_OK) else 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(src.read_bytes())
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _remove_file(repo: Path, path: str) -> None:
    """Delete `path`, then the folders it leaves empty (as git apply does), never `repo` itself."""
    (repo / path).unlink()
    parent = (repo / path).parent
    while parent != repo and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


def _copy_result(repo: Path, checked: _Checked) -> None:
    """Bring what git wrote in the scratch repository into `repo`: deletions first (a file may give way to a
    folder of the same name), then every file the patch leaves."""
    _unchanged_since_check(repo, checked)
    paths = _paths(checked.files)
    try:
        for path in paths:
            if not os.path.lexists(checked.scratch / path) and os.path.lexists(repo / path):
                _remove_file(repo, path)
        for path in paths:
            if os.path.lexists(checked.scratch / path):
                _write_file(checked.scratch / path, repo / path)
    except OSError as exc:
        raise UserError(f"writing the patch into {repo} failed: {exc.strerror}: {printable(str(exc.filename))}",
                        hint="check the tree (git status) and apply patch.diff by hand") from None


def _encode(patch: str) -> bytes:
    try:
        return patch.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise UserError("the patch cannot be applied: it is not UTF-8 text", hint="review patch.diff") from None


def diffstat(files: list[FileChange], made_exec: set[str] | frozenset[str] = frozenset()) -> str:
    lines, plus, minus = [], 0, 0
    for fc in files:
        name = printable(fc.new_path) if fc.old_path == fc.new_path else f"{printable(fc.old_path)} => {printable(fc.new_path)}"
        counts = "binary" if "-" in (fc.added, fc.deleted) else f"+{fc.added} -{fc.deleted}"
        if counts != "binary":
            plus, minus = plus + int(fc.added), minus + int(fc.deleted)
        lines.append(f" {name} | {counts}" + (" (executable)" if fc.new_path in made_exec else ""))
    lines.append(f" {len(files)} file(s) changed, {plus} insertion(s), {minus} deletion(s)")
    return "\n".join(lines)


def apply_to_tree(repo: str | Path, patch: str, *, allow_exec: bool = False) -> TreeApplication:
    """Check `patch` against `repo`'s working tree and copy the checked result in (see the module docstring)."""
    repo = Path(repo)
    with _checked(repo, _encode(patch), allow_exec) as checked:
        _copy_result(repo, checked)
        return TreeApplication(command="git apply (in a scratch copy)",
                               diffstat=diffstat(checked.files, checked.made_exec))
