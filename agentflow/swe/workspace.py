"""Getting a task's repository at `base_commit` into a sandbox workspace.

A plain directory becomes a git repository with ONE deterministic commit (its files, modes 0644, a fixed
identity and date), whose hash is the task's `base_commit`. A git repository (local or a URL) is cloned into
the cache without its config (`swe.hostgit`) and used as is; what a local one's git files point to must stay
where the task's paths may (`SWETask.confine`). The tree goes into the sandbox as a tar through
`Sandbox.write_file` (any backend) and is committed again the same way, so HEAD equals `base_commit`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import re
import shlex
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from agentflow.config import cache_dir, file_lock
from agentflow.errors import SandboxError, UserError
from agentflow.sandbox.base import Sandbox, sh_command
from agentflow.swe.hostgit import OwnRepo, alternate_object_dirs, clone, git, has_commit, init, resolve_ref
from agentflow.swe.patch import SCRATCH_DIR
from agentflow.swe.tasks import SWETask
from agentflow.swe.testrun import SHIM_DIR, SITE_PLUGINS

SNAPSHOT_ENV = {
    "GIT_AUTHOR_NAME": "agentflow",
    "GIT_AUTHOR_EMAIL": "tasks@agentflow.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "agentflow",
    "GIT_COMMITTER_EMAIL": "tasks@agentflow.invalid",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+0000",
}
"""Fixed identity and dates of snapshot commits: the hash depends on the files only."""
SNAPSHOT_MESSAGE = "base"
GIT_FLAGS = "-c core.autocrlf=false -c core.fileMode=true -c commit.gpgsign=false -c init.defaultBranch=main"
EVAL_DIR = SCRATCH_DIR
"""Scratch folder of the harness inside the workspace (git-excluded)."""
_SKIP_DIRS = {".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", EVAL_DIR}
_SKIP_SUFFIXES = (".pyc", ".pyo")
_lock = threading.Lock()


_HEX = re.compile(r"[0-9a-fA-F]{4,40}")
Check = Callable[[Path, str], Path]
"""`SWETask.confine`: a path resolved, or a UserError when a task may not read it."""


def snapshot_files(src: Path, check: Check | None = None) -> list[Path]:
    """Files of a directory snapshot, relative, sorted (what goes into the deterministic commit).

    A symlinked file is read through (its content is committed); with `check`, its target must be allowed."""
    out = []
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(files):
            if name.endswith(_SKIP_SUFFIXES) or name == ".git":  # a `.git` file would make the copy another repo
                continue
            full = Path(root) / name
            if check is not None and full.is_symlink():
                check(full, f"repo file {full.relative_to(src)} ->")
            if full.is_file():
                out.append(full.relative_to(src))
    return out


def copy_files(src: Path, dest: Path, files: Iterable[str | Path], mode: int | None = None) -> None:
    """`files` (relative to `src`) copied into `dest` by content (a symlink's target's), `mode` set when given."""
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((src / rel).read_bytes())
        if mode is not None:
            target.chmod(mode)


def snapshot_commit(src: str | Path, dest: str | Path, *, check: Check | None = None) -> str:
    """Make `dest` a git repository holding `src`'s files in one deterministic commit; return its hash."""
    src, dest = Path(src), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    copy_files(src, dest, snapshot_files(src, check), mode=0o644)
    repo = init(dest)
    git(["add", "-f", "-A", "."], repo)
    git(["commit", "-q", "--no-verify", "-m", SNAPSHOT_MESSAGE], repo, env=SNAPSHOT_ENV)
    return git(["rev-parse", "HEAD"], repo).decode().strip()


def _git_dir(src: Path) -> Path | None:
    """The git directory of a local repository folder (`.git`, a `.git` file's target, or a bare `x.git`)."""
    dot_git = src / ".git"
    if dot_git.is_file():
        text = dot_git.read_text(errors="replace").strip()
        return src / text.removeprefix("gitdir:").strip() if text.startswith("gitdir:") else dot_git
    if dot_git.is_dir():
        return dot_git
    if src.name.endswith(".git") and (src / "HEAD").is_file() and (src / "objects").is_dir():
        return src
    return None


def _check_git_dir(git_dir: Path, check: Check) -> None:
    """Everything git reads when it copies the repository stays where the task's paths may: the git directory,
    the main one of a worktree (`commondir`), object `alternates`, and every symlink inside them."""
    dirs = [check(git_dir, "repo's git directory")]
    common = dirs[0] / "commondir"
    if common.is_file():
        dirs.append(check(dirs[0] / common.read_text(errors="replace").strip(), "repo's commondir"))
    for d in list(dirs):  # read as git reads them: quoted, relative, alternates of alternates
        dirs.extend(check(alt, "repo's object alternate") for alt in alternate_object_dirs(d / "objects"))
    for d in dirs:
        for root, subdirs, files in os.walk(d):
            for name in (*subdirs, *files):
                if (Path(root) / name).is_symlink():
                    check(Path(root) / name, f"repo's git file {name} ->")


def host_repo(task: SWETask, root: str | Path | None = None) -> Path:
    """A git repository on the host that holds `task.base_commit` (built or cloned once, then cached)."""
    return cached_repo(task, root)[0]


def cached_repo(task: SWETask, root: str | Path | None = None) -> tuple[Path, str]:
    """`host_repo` and the commit to use in it (`base_commit`; a local repository's branch or HEAD resolved)."""
    kind, source = task.repo_source()
    root = Path(root) if root is not None else cache_dir() / "swe-repos"
    root.mkdir(parents=True, exist_ok=True)
    commit = task.base_commit
    git_dir = _git_dir(Path(source)) if kind == "dir" else None
    if git_dir is not None:
        kind = "git"  # a local repository: cloned like a URL, never used in place
        _check_git_dir(git_dir, task.confine)
        if not _HEX.fullmatch(commit):  # a moving name: pin it, so that the cached clone is the right one
            commit = resolve_ref(source, commit) or commit
    key = hashlib.sha256(f"{kind}:{source}:{commit}".encode()).hexdigest()[:16]
    dest = root / f"{Path(source.rstrip('/')).name.removesuffix('.git')}-{key}"
    # threads of this process, and other processes sharing the cache (Ray workers on one host, parallel runs):
    # one builds while the others wait, and nobody replaces a repository another one is reading
    with _lock, file_lock(root / ".lock"):
        if dest.is_dir() and has_commit(OwnRepo(dest), commit):  # a clone of ours, from an earlier run
            return dest, commit
        tmp = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
        try:
            if kind == "dir":
                head = snapshot_commit(source, tmp / "repo", check=task.confine)
                if not head.startswith(commit) and not commit.startswith(head):
                    raise UserError(
                        f"task {task.instance_id}: {source} snapshots to commit {head[:12]}, "
                        f"but the task says base_commit {commit[:12]}",
                        hint="the directory changed since the task was written; restore it or update base_commit",
                    )
            else:
                if not has_commit(clone(source, tmp / "repo"), commit):
                    raise UserError(f"task {task.instance_id}: commit {task.base_commit} not found in {source}")
            shutil.rmtree(dest, ignore_errors=True)
            (tmp / "repo").rename(dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return dest, commit


def archive(repo: Path, commit: str) -> bytes:
    """Tar of the tree at `commit`."""
    return git(["archive", "--format=tar", commit, "--"], OwnRepo(repo))


async def run_checked(sandbox: Sandbox, command: str, what: str, timeout: float | None = None) -> str:
    result = await sandbox.exec(command, timeout=timeout)
    if not result.ok:
        raise SandboxError(f"{what} failed (exit {result.exit_code}): {result.output.strip()[-500:]}")
    return result.stdout


SITE_DIR = f"{EVAL_DIR}/site"
"""Where a task's `requirements` are installed (`pip install --target`); it is on the tests' PYTHONPATH."""


async def upload_tar(sandbox: Sandbox, tar: bytes, dest: str, *, python: str = "python3") -> None:
    """Unpack a tar into `dest` (relative to the workspace) with the sandbox's python; any backend."""
    blob = f"{EVAL_DIR}/upload.b64"
    await sandbox.write_file(blob, base64.b64encode(tar).decode("ascii"))
    unpack = (
        "import base64,io,tarfile;"
        f"data=base64.b64decode(open({blob!r}).read());"
        "tf=tarfile.open(fileobj=io.BytesIO(data));"
        "kw={'filter':'data'} if hasattr(tarfile,'data_filter') else {};"
        f"tf.extractall({dest!r},**kw)"
    )
    await run_checked(sandbox, f"{python} -c {shlex.quote(unpack)} && rm -f {blob}", f"unpacking into {dest}")


def _tar_dir(path: Path) -> bytes:
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for child in sorted(path.iterdir()):
            tf.add(child, arcname=child.name)
    return buf.getvalue()


async def install_requirements(sandbox: Sandbox, task: SWETask, *, python: str = "python3") -> None:
    """pip-install the task's `requirements` into SITE_DIR (on every test run's PYTHONPATH), offline from
    `wheelhouse` when given (without `requirements`: every wheel in it). From a wheelhouse nothing is resolved
    (`--no-deps`): `--target` resolves against an empty environment, so a dependency the sandbox's Python has
    already would have to be in the wheelhouse and would shadow the interpreter's own."""
    wheels: list[str] = []
    if task.wheelhouse:
        wheelhouse = task.local_path(task.wheelhouse, "wheelhouse")
        if not wheelhouse.is_dir():
            raise UserError(f"task {task.instance_id}: wheelhouse {wheelhouse} is not a directory")
        wheels = sorted(p.name for p in wheelhouse.glob("*.whl"))
        if not task.requirements and not wheels:
            raise UserError(f"task {task.instance_id}: wheelhouse {wheelhouse} holds no wheels (*.whl)",
                            hint="pip download --only-binary :all: -d DIR PACKAGE ... puts a package's wheels there")
        await upload_tar(sandbox, await asyncio.to_thread(_tar_dir, wheelhouse), f"{EVAL_DIR}/wheelhouse", python=python)
        source = f"--no-index --find-links {EVAL_DIR}/wheelhouse --no-deps "
        targets = list(task.requirements) or [f"{EVAL_DIR}/wheelhouse/{name}" for name in wheels]
    elif task.requirements:
        source, targets = "", list(task.requirements)
    else:
        return
    reqs = " ".join(shlex.quote(r) for r in targets)
    await run_checked(
        sandbox,
        f"{python} -m pip install -q --disable-pip-version-check --no-input {source}--target {SITE_DIR} {reqs}",
        "installing requirements",
        timeout=None,
    )
    await run_checked(sandbox, f"{python} -c {shlex.quote(_LIST_PLUGINS)}", "listing the requirements' pytest plugins")


# the modules of the `pytest11` entry points of the distributions installed into SITE_DIR (`testrun.test_env`)
_LIST_PLUGINS = (
    "import configparser,glob\n"
    "mods=[]\n"
    f"for f in sorted(glob.glob({SITE_DIR!r}+'/*.dist-info/entry_points.txt')):\n"
    "    c=configparser.ConfigParser(delimiters=('=',));c.read(f)\n"
    "    mods+=[v.split(':')[0].strip() for v in (c['pytest11'].values() if c.has_section('pytest11') else [])]\n"
    f"open({f'{EVAL_DIR}/{SITE_PLUGINS}'!r},'w').write(','.join(mods))\n"
)


PYTHON_SHIM = f"{EVAL_DIR}/{SHIM_DIR}/python"
"""`python` for a sandbox that has only `python3` (the tests' PATH starts with its folder, `testrun.test_env`)."""


async def ensure_python_shim(sandbox: Sandbox, python: str = "python3") -> bool:
    """Make `python` run `python` (the sandbox's python3) when the sandbox has none: a test command or a
    repository's script saying `python -m pytest` would otherwise be "command not found". Whether one was made."""
    script = (f"command -v python >/dev/null 2>&1 && exit 1; mkdir -p {EVAL_DIR}/{SHIM_DIR} && "
              f'ln -sf "$(command -v {python})" {PYTHON_SHIM}')
    return (await sandbox.exec(sh_command(script))).ok


async def seed_workspace(sandbox: Sandbox, task: SWETask, *, python: str = "python3") -> str:
    """Put the repository at `base_commit` into the sandbox's workspace as a git repository, install the task's
    `requirements` and run its `setup_commands`; its HEAD ("" when the sandbox has no git)."""
    repo, commit = await asyncio.to_thread(cached_repo, task)
    tar = await asyncio.to_thread(archive, repo, commit)
    await upload_tar(sandbox, tar, ".", python=python)
    has_git = (await sandbox.exec("command -v git >/dev/null 2>&1")).ok
    head = ""
    if has_git:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in SNAPSHOT_ENV.items())
        script = (
            f"git {GIT_FLAGS} init -q . && printf '%s\\n' {EVAL_DIR}/ __pycache__/ '*.pyc' .pytest_cache/ >> .git/info/exclude && "
            f"git {GIT_FLAGS} add -f -A . && git reset -q -- {EVAL_DIR} 2>/dev/null; "
            f"{env} git {GIT_FLAGS} commit -q --no-verify --allow-empty -m {SNAPSHOT_MESSAGE} && git rev-parse HEAD"
        )
        head = (await run_checked(sandbox, sh_command(script), "committing the base state")).strip()
    await ensure_python_shim(sandbox, python)
    await install_requirements(sandbox, task, python=python)
    for command in task.setup_commands:
        await run_checked(sandbox, sh_command(command), f"setup command {command!r}", timeout=None)
    return head


def repo_task(repo: Path, issue: str, *, wheelhouse: Path | None = None) -> SWETask:
    """A task for a plain repository: its committed HEAD (git) or its files as they are (a snapshot); the
    wheels of `wheelhouse`, if given, installed for its test runs."""
    if not repo.exists():
        raise UserError(f"repository {repo} not found", hint="give the path of a repository directory")
    if not repo.is_dir():
        raise UserError(f"repository {repo} is not a directory")
    repo = repo.resolve()
    if _git_dir(repo) is not None:
        # asked from outside: the repository may come from a tarball, its config is not trusted either
        base = resolve_ref(str(repo), "HEAD")
        if base is None:
            raise UserError(f"repository {repo} has no commit yet", hint="commit the code to repair first")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            base = snapshot_commit(repo, Path(tmp) / "r")
    return SWETask(
        instance_id=repo.name or "repo",
        repo=str(repo),
        base_commit=base,
        problem_statement=issue,
        FAIL_TO_PASS=[],
        wheelhouse=str(wheelhouse.resolve()) if wheelhouse is not None else None,
    )
