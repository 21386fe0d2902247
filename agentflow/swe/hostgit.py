"""The one place that runs git on the host, with nothing from a repository's config able to run a command.

A task's repository and the user's own tree are untrusted: their `.git/config` (filters, fsmonitor, hooks, an
ssh command, `include.path`...) runs as the user as soon as git works inside them. So `run_git`, the only
function here that starts git, works in an `OwnRepo` (one agentflow made with `init` or `clone`) or in an empty
folder of its own, never in a folder a caller names: a foreign repository is only read from outside
(`clone --no-local`, `ls-remote`: git's own `upload-pack`). Every call also drops system and global config,
the caller's `GIT_*` variables, hooks, fsmonitor and attribute files, and every transport but the network
ones and `file`. docs/security.md ("Host git") lists what this was tested against.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from agentflow.errors import UserError

SAFE_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.attributesFile=/dev/null",
    "core.autocrlf=false",
    "core.fileMode=true",
    "commit.gpgsign=false",
    "tag.gpgsign=false",
    "init.defaultBranch=main",
    "gc.auto=0",
    "maintenance.auto=false",
    "credential.helper=",
    "core.pager=cat",
    "protocol.allow=never",
    "protocol.https.allow=always",
    "protocol.http.allow=always",
    "protocol.ssh.allow=always",
    "protocol.git.allow=always",
    "protocol.file.allow=always",
    "protocol.ext.allow=never",
)
"""`-c` settings of every host git call (command-line config beats any file; these come last, so they also beat
a caller's own `-c`)."""
_KEPT_GIT_ENV = ("GIT_SSH", "GIT_SSL_", "GIT_TRACE", "GIT_CURL_", "GIT_HTTP_")
"""The user's own transport settings stay; any other GIT_* variable (GIT_DIR, GIT_CONFIG_PARAMETERS, ...) could
point git at another repository or add config."""


@dataclass(frozen=True)
class OwnRepo:
    """A repository agentflow made (`init`, `clone`, or one of its cached clones): its config is git's
    defaults, so git may work in it. Never a task's or the user's repository."""

    path: Path
    """The work tree; the repository is `path/.git`."""


def safe_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k.startswith(_KEPT_GIT_ENV)}
    env.update({k: v for k, v in (extra or {}).items() if k.startswith(("GIT_AUTHOR_", "GIT_COMMITTER_"))})
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_ATTR_NOSYSTEM": "1",
                "GIT_TERMINAL_PROMPT": "0", "GIT_NO_REPLACE_OBJECTS": "1", "GIT_PAGER": "cat"})
    return env


def run_git(args: list[str], repo: OwnRepo | None, *, env: dict[str, str] | None = None,
            input: bytes | None = None, config: tuple[str, ...] = ()) -> subprocess.CompletedProcess[bytes]:
    """Every host git call: `git args` in `repo`, or with no repository at all (in an empty folder git looks no
    higher than) when `repo` is None. `env` may add only author/committer names and dates; `config` adds `-c`
    settings below `SAFE_CONFIG`. Paths in `args` must be absolute when `repo` is None."""
    cmd = ["git", *(item for kv in (*config, *SAFE_CONFIG) for item in ("-c", kv)), *args]
    with tempfile.TemporaryDirectory(prefix="agentflow-git-") as empty:
        run_env = safe_env(env)
        if repo is None:
            cwd = Path(empty)
            run_env["GIT_CEILING_DIRECTORIES"] = str(cwd.parent)  # git looks in `empty` only
        else:
            cwd = repo.path
            run_env.update({"GIT_DIR": str(repo.path / ".git"), "GIT_WORK_TREE": str(repo.path)})
        try:
            return subprocess.run(cmd, cwd=cwd, env=run_env, input=input, capture_output=True, check=False)
        except FileNotFoundError:
            raise UserError("git is not installed", hint="install git (agentflow uses it for repositories)") from None


def git(args: list[str], repo: OwnRepo | None, *, env: dict[str, str] | None = None,
        input: bytes | None = None) -> bytes:
    """`run_git`, its stdout; a failure is a UserError with git's message."""
    proc = run_git(args, repo, env=env, input=input)
    if proc.returncode != 0:
        where = f" in {repo.path}" if repo is not None else ""
        raise UserError(f"git {args[0]} failed{where}: {proc.stderr.decode(errors='replace').strip()[:300]}")
    return proc.stdout


def init(dest: Path) -> OwnRepo:
    """A new, empty repository at `dest` (no template: no sample hooks, no `info/` files)."""
    git(["init", "-q", "--template=", str(dest.absolute())], None)
    return OwnRepo(dest.absolute())


def _absolute(source: str) -> str:
    """A local folder made absolute (git runs in a folder of its own); a URL as it is."""
    return str(Path(source).absolute()) if "://" not in source and os.path.exists(source) else source


def clone(source: str, dest: Path) -> OwnRepo:
    """Copy a repository (a URL or a local folder) into `dest` without its config, hooks or attributes files."""
    # `--`: a repo field like `--upload-pack=...` is a repository name, never an option
    git(["clone", "-q", "--no-checkout", "--no-local", "--template=", "--", _absolute(source), str(dest.absolute())], None)
    return OwnRepo(dest.absolute())


def resolve_ref(source: str, ref: str) -> str | None:
    """The commit `ref` (HEAD, a branch or a tag) names in the repository at `source`, asked from outside it."""
    out = git(["ls-remote", "--", _absolute(source)], None).decode(errors="replace")
    refs = {name: sha for sha, name in (line.split("\t", 1) for line in out.splitlines() if "\t" in line)}
    names = (f"refs/tags/{ref}^{{}}", ref, f"refs/heads/{ref}", f"refs/tags/{ref}")
    return next((refs[name] for name in names if name in refs), None)


def has_commit(repo: OwnRepo, commit: str) -> bool:
    return run_git(["cat-file", "-e", f"{commit}^{{commit}}"], repo).returncode == 0


ALTERNATES_DEPTH = 5
"""git reads alternates of alternates this deep and ignores deeper ones (`read_info_alternates`)."""
_C_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, '"': 34}


def _unquote_c_style(text: bytes, start: int) -> tuple[bytes, int] | None:
    """git's `unquote_c_style`: the path in the quotes at `text[start]` and the index after the closing quote;
    None for broken quoting (git then reads the entry unquoted)."""
    out, i = bytearray(), start + 1
    while i < len(text):
        ch, i = text[i], i + 1
        if ch == 0x22:  # the closing quote
            return bytes(out), i
        if ch != 0x5C:
            out.append(ch)
            continue
        esc = text[i:i + 1].decode("latin-1")
        digits = text[i + 1:i + 3]
        if esc and esc in _C_ESCAPES:
            out.append(_C_ESCAPES[esc])
            i += 1
        elif esc and esc in "0123" and len(digits) == 2 and all(0x30 <= c <= 0x37 for c in digits):
            out.append(int(text[i:i + 3], 8))
            i += 3
        else:
            return None
    return None


def parse_alternates(text: bytes) -> list[bytes]:
    """The entries of an `objects/info/alternates` file as git reads them (`parse_alt_odb_entry`): one per
    line, `#` starts a comment, a C-quoted path is unquoted, nothing is stripped."""
    text = text.split(b"\0", 1)[0]  # git reads the file as a C string
    entries, i = [], 0
    while i < len(text):
        end = text.find(b"\n", i)
        end = len(text) if end < 0 else end
        entry = b""
        quoted = _unquote_c_style(text, i) if text[i:i + 1] == b'"' else None
        if quoted is not None:
            entry, end = quoted
        elif text[i:i + 1] != b"#":
            entry = text[i:end]
        if entry:
            entries.append(entry)
        i = end + 1 if end < len(text) else end
    return entries


def alternate_object_dirs(objects: Path) -> list[Path]:
    """Every object folder git reads besides `objects`: its alternates, theirs, ... as git finds them (relative
    entries against the real path of the folder naming them), each once. Deeper than git reads is a UserError:
    what git then does is not worth predicting for a task repository."""
    found: list[Path] = []

    def walk(base: Path, depth: int) -> None:
        info = base / "info" / "alternates"
        if not info.is_file():
            return
        if depth > ALTERNATES_DEPTH:
            raise UserError(f"object alternates nested more than {ALTERNATES_DEPTH} deep at {info}",
                            hint="repack the task repository without alternates (git repack -a -d)")
        for entry in parse_alternates(info.read_bytes()):
            path = Path(os.path.normpath(os.path.join(os.path.realpath(base), os.fsdecode(entry))))
            if path not in found and path.is_dir():
                found.append(path)
                walk(path, depth + 1)

    walk(objects, 0)
    return found
