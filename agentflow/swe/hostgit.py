"""The one place that runs git on the host for task repositories, with nothing from config able to run a command.

A task repository comes from a tasks file, which is untrusted input: its `.git/config` can name a smudge or
clean filter, an fsmonitor, hooks, an ssh command, a proxy, drivers... and any of them runs as the user as soon as
git works inside that repository. So git never works inside it. `clone` copies it with `--no-local`: the copy
gets the objects and refs but not the config, hooks or `info/` files, and the only process git starts in the
source is `upload-pack`, which git keeps safe to serve untrusted repositories (the SECURITY section of git(1)
documents exactly this way to sanitize one). `resolve_ref` asks the same `upload-pack` (`ls-remote`).

Every call also runs without system and global config (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`: a
user's git-lfs filter would otherwise run on whatever a task's `.gitattributes` asks for), with hooks, fsmonitor
and attribute files off, and only the network transports plus `file` allowed (no `ext::` or other remote helper).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from agentflow.errors import UserError

SAFE_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.attributesFile=/dev/null",
    "core.autocrlf=false",
    "core.fileMode=true",
    "commit.gpgsign=false",
    "init.defaultBranch=main",
    "gc.auto=0",
    "maintenance.auto=false",
    "credential.helper=",
    "protocol.allow=never",
    "protocol.https.allow=always",
    "protocol.http.allow=always",
    "protocol.ssh.allow=always",
    "protocol.git.allow=always",
    "protocol.file.allow=always",
    "protocol.ext.allow=never",
)
"""`-c` settings of every host git call (command-line config beats any file)."""
_KEPT_GIT_ENV = ("GIT_SSH", "GIT_SSL_", "GIT_TRACE", "GIT_CURL_", "GIT_HTTP_")
"""The user's own transport settings stay; any other GIT_* variable (GIT_DIR, GIT_CONFIG_PARAMETERS, ...) could
point git at another repository or add config."""


def safe_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k.startswith(_KEPT_GIT_ENV)}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_ATTR_NOSYSTEM": "1",
                "GIT_TERMINAL_PROMPT": "0", "GIT_NO_REPLACE_OBJECTS": "1"})
    env.update(extra or {})
    return env


def git(args: list[str], cwd: Path, *, env: dict[str, str] | None = None, input: bytes | None = None) -> bytes:
    """Run `git args` in `cwd` (a repository agentflow made, never a task's own) with the safe settings."""
    cmd = ["git", *(item for kv in SAFE_CONFIG for item in ("-c", kv)), *args]
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=safe_env(env), input=input, capture_output=True, check=False)
    except FileNotFoundError:
        raise UserError("git is not installed", hint="install git to set up task repositories") from None
    if proc.returncode != 0:
        raise UserError(f"git {args[0]} failed in {cwd}: {proc.stderr.decode(errors='replace').strip()[:300]}")
    return proc.stdout


def clone(source: str, dest: Path) -> None:
    """Copy a repository (a URL or a local folder) into `dest` without its config, hooks or attributes files."""
    # `--`: a repo field like `--upload-pack=...` is a repository name, never an option
    git(["clone", "-q", "--no-checkout", "--no-local", "--", source, str(dest)], dest.parent)


def resolve_ref(source: str, ref: str, cwd: Path) -> str | None:
    """The commit `ref` (HEAD, a branch or a tag) names in the repository at `source`, asked from outside it."""
    out = git(["ls-remote", "--", source], cwd).decode(errors="replace")
    refs = {name: sha for sha, name in (line.split("\t", 1) for line in out.splitlines() if "\t" in line)}
    for name in (f"refs/tags/{ref}^{{}}", ref, f"refs/heads/{ref}", f"refs/tags/{ref}"):
        if name in refs:
            return refs[name]
    return None


def has_commit(repo: Path, commit: str) -> bool:
    try:
        git(["cat-file", "-e", f"{commit}^{{commit}}"], repo)
        return True
    except UserError:
        return False
