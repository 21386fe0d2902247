"""A repository whose own `.git` asks git to run a command in every way git knows, each leaving its own marker.

Used by the tests of every host command that touches a repository it did not make (`eval`/`bench`/`repair` set-up
of a task repository, `repair --apply` / `run --apply` into the user's tree, `repair --check`): after the command,
`fired(markers)` must be empty. The settings are put in one of three places (`WHERES`): the repository's
`.git/config`, a file it names with `include.path`, or one it names with `includeIf`.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

GIT_SUBCOMMANDS = ("apply", "clone", "ls-remote", "archive", "cat-file", "init", "add", "commit", "rev-parse",
                   "upload-pack", "status", "diff", "log", "show", "fetch", "checkout", "read-tree", "write-tree")
"""Every subcommand a host command could run: each gets a pager and an alias."""
HOOKS = ("applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
         "prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout", "post-merge", "pre-push",
         "pre-receive", "update", "proc-receive", "post-receive", "post-update", "reference-transaction",
         "push-to-checkout", "pre-auto-gc", "post-rewrite", "sendemail-validate", "fsmonitor-watchman",
         "p4-changelist", "p4-prepare-changelist", "p4-post-changelist", "p4-pre-submit", "post-index-change")
"""githooks(5), all of them."""
COMMAND_KEYS = (
    "filter.x.clean", "filter.x.smudge", "filter.x.process", "filter.lfs.clean", "filter.lfs.smudge",
    "filter.lfs.process", "diff.x.command", "diff.x.textconv", "diff.external", "merge.x.driver",
    "core.fsmonitor", "core.sshCommand", "core.gitProxy", "core.askPass", "core.pager", "core.editor",
    "sequence.editor", "core.alternateRefsCommand", "credential.helper", "credential.https://example.com.helper",
    "gpg.program", "gpg.openpgp.program", "gpg.x509.program", "gpg.ssh.program", "gpg.ssh.defaultKeyCommand",
    "uploadpack.packObjectsHook", "remote.origin.uploadpack", "remote.origin.receivepack", "difftool.x.cmd",
    "mergetool.x.cmd", "browser.x.cmd", "web.browser", "man.x.cmd", "trailer.x.command", "trailer.x.cmd",
    "sendemail.sendmailcmd", "instaweb.httpd", "hook.x.command", "gc.pruneExpire",
    *(f"pager.{cmd}" for cmd in GIT_SUBCOMMANDS), *(f"alias.{cmd}" for cmd in GIT_SUBCOMMANDS),
)
"""Every config key whose value git runs as a command (git-config(1)), plus the pagers and aliases of the
subcommands used."""
OTHER_SETTINGS = {
    "filter.x.required": "false", "filter.lfs.required": "false", "diff.tool": "x", "merge.tool": "x",
    "protocol.ext.allow": "always", "protocol.allow": "always", "gc.auto": "1", "gc.autoDetach": "false",
    "hook.x.event": "pre-commit", "core.fsmonitorHookVersion": "2", "commit.gpgSign": "true",
    "tag.gpgSign": "true", "core.autocrlf": "true",
}
"""Settings that make git reach for the commands above."""
WHERES = ("config", "include.path", "includeIf")
ATTRIBUTES = "* filter=x diff=x merge=x\n*.py filter=lfs\n"


def _marker_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _config_text(markers: Path, hooks: Path) -> str:
    """A git config file holding every key of COMMAND_KEYS (each touching a marker of its own name)."""
    lines = []
    settings = {key: f"!touch {markers / _marker_name(key)}; cat" if key.startswith("alias.")
                else f"touch {markers / _marker_name(key)}; cat" for key in COMMAND_KEYS}
    settings.update(OTHER_SETTINGS)
    settings["core.hooksPath"] = str(hooks)
    for key, value in settings.items():
        section, _, name = key.rpartition(".")
        head, _, sub = section.partition(".")
        lines.append(f"[{head} {_quote(sub)}]" if sub else f"[{head}]")
        lines.append(f"\t{name} = {_quote(value)}")
    return "\n".join(lines) + "\n"


def _write_hooks(folder: Path, markers: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for hook in HOOKS:
        path = folder / hook
        path.write_text(f"#!/bin/sh\ntouch {markers / ('hook-' + hook)}\ncat >/dev/null 2>&1 || true\n")
        path.chmod(0o755)


def arm(repo: Path, markers: Path, where: str = "config") -> None:
    """Give `repo` (a work tree with `.git/`) every command-running setting, in `where`, and every hook (in
    `.git/hooks` and in the folder `core.hooksPath` names), plus `.gitattributes` naming the drivers. The
    repository's files and history are left as they are (`.gitattributes` is written, not committed)."""
    markers.mkdir(exist_ok=True)
    dot_git = repo / ".git"
    hooks = repo.parent / f"{repo.name}-hooks"
    _write_hooks(dot_git / "hooks", markers)
    _write_hooks(hooks, markers)
    text = _config_text(markers, hooks)
    if where == "config":
        with open(dot_git / "config", "a") as fh:
            fh.write(text)
    else:
        included = repo.parent / f"{repo.name}-included.config"
        included.write_text(text)
        head = "[include]" if where == "include.path" else '[includeIf "gitdir:**"]'
        with open(dot_git / "config", "a") as fh:
            fh.write(f"{head}\n\tpath = {_quote(str(included))}\n")
    (repo / ".gitattributes").write_text(ATTRIBUTES)
    (dot_git / "info").mkdir(exist_ok=True)
    (dot_git / "info" / "attributes").write_text(ATTRIBUTES)


def fired(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.iterdir()) if markers.is_dir() else []


def self_test(repo: Path, markers: Path) -> list[str]:
    """The markers git sets off when it does work inside `repo` itself: proof that `arm` armed it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_PAGER": "",
                "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@t"})
    patch = "--- a/mod.py\n+++ b/mod.py\n@@ -1 +1 @@\n-VALUE = 1\n+VALUE = 1\n"
    for argv in (["status"], ["apply", "--check", "-"], ["diff", "HEAD"], ["commit", "-qam", "x", "--allow-empty"]):
        subprocess.run(["git", *argv], cwd=repo, env=env, input=patch, text=True, capture_output=True, check=False)
    return fired(markers)
