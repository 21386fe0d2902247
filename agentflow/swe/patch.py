"""Patches: clean up a model's diff, tell test files apart, extract a diff from a workspace, apply one, tell
one that changes no code (a noop: only docstrings, comments or whitespace).

A patch is applied by `git apply` alone, and what it touches is the same git's `--numstat` reading of it, so
grading restores files from the reading that wrote them. SWE-bench's `patch --fuzz` fallback reads headers git
ignores; a patch only it would apply is refused here, as one that does not apply.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from agentflow.errors import SandboxError
from agentflow.pysyntax import parsed
from agentflow.sandbox.base import Sandbox, sh_command

APPLY_COMMAND = "git apply --verbose"
"""The one command that applies a patch; the diff is given on stdin (`-`), so nothing is left in the workspace."""
SCRATCH_DIR = ".agentflow_eval"
_FENCE = re.compile(r"```(?:diff|patch)?[ \t]*\n(.*?)```", re.DOTALL)
_DIFF_GIT = re.compile(r"^diff --git a/(.+?) b/(.+)$")
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
_TEST_DIRS = {"test", "tests", "testing", "__tests__"}


def is_test_path(path: str) -> bool:
    """True for files that belong to a test suite: under tests/ (or test/, testing/), test_*.py,
    *_test.py, *_tests.py, conftest.py."""
    p = PurePosixPath(path.strip().removeprefix("a/").removeprefix("b/"))
    name = p.name
    return (any(part in _TEST_DIRS for part in p.parts[:-1]) or name == "conftest.py"
            or (name.startswith("test_") and name.endswith(".py"))
            or name.endswith(("_test.py", "_tests.py")))


@dataclass
class FilePatch:
    """The part of a diff that touches one file."""

    old_path: str | None
    new_path: str | None
    text: str
    hunks: int = 0

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""


@dataclass
class ParsedPatch:
    files: list[FilePatch] = field(default_factory=list)
    problem: str | None = None
    """Why the text is not a usable diff (None when it is)."""


def _strip_prefix(path: str) -> str | None:
    path = path.split("\t", 1)[0].strip()
    if path == "/dev/null":
        return None
    return path[2:] if path[:2] in ("a/", "b/") else path


def parse_patch(diff: str) -> ParsedPatch:
    """Split a unified diff into per-file parts and say whether it is usable."""
    if not diff or not diff.strip():
        return ParsedPatch(problem="empty patch")
    files: list[FilePatch] = []
    current: list[str] = []
    cur: FilePatch | None = None

    def flush() -> None:
        nonlocal cur, current
        if cur is not None:
            cur.text = "".join(current)
            files.append(cur)
        cur, current = None, []

    lines = diff.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _DIFF_GIT.match(line.rstrip("\n"))
        if m:
            flush()
            cur = FilePatch(old_path=m.group(1), new_path=m.group(2), text="")
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            if cur is None or cur.hunks:
                flush()
                cur = FilePatch(old_path=None, new_path=None, text="")
            cur.old_path = _strip_prefix(line[4:])
            cur.new_path = _strip_prefix(lines[i + 1][4:])
            current.append(line)
            current.append(lines[i + 1])
            i += 2
            continue
        elif _HUNK.match(line) and cur is not None:
            cur.hunks += 1
        if cur is not None:
            current.append(line)
        i += 1
    flush()
    if not files:
        return ParsedPatch(problem="no file headers ('diff --git' or '---'/'+++') found")
    for fp in files:
        binary_or_mode = any(k in fp.text for k in ("GIT binary patch", "Binary files", "new mode", "rename from", "new file mode", "deleted file mode"))
        if fp.hunks == 0 and not binary_or_mode:
            return ParsedPatch(files=files, problem=f"no hunks for {fp.path}")
    return ParsedPatch(files=files)


def is_empty_patch(diff: str | None) -> bool:
    return diff is None or not diff.strip()


def changed_paths(diff: str) -> list[str]:
    return [fp.path for fp in parse_patch(diff).files]


NOOP_PARSE_LIMIT = 2_000_000
"""Longest source (characters) `changes_nothing` parses: the files come from the sandbox, where nothing is
trusted, and a longer one simply counts as changed."""
_OPAQUE = ("new file mode", "deleted file mode", "rename from", "copy from", "GIT binary patch", "Binary files")


def touched_in_place(diff: str) -> list[str] | None:
    """The files a diff modifies in place; None when it adds, deletes, renames or copies a file, touches a binary
    one, or is no usable diff: each of those is a change whatever the files hold."""
    parsed = parse_patch(diff)
    if parsed.problem is not None:
        return None
    paths: list[str] = []
    for fp in parsed.files:
        if fp.old_path is None or fp.old_path != fp.new_path or any(k in fp.text for k in _OPAQUE):
            return None
        paths.append(fp.path)
    return paths


def changes_nothing(before: Mapping[str, str | None], after: Mapping[str, str | None]) -> bool:
    """Whether the files a patch touches (path -> content, None for one that could not be read) hold the same
    code `after` it as `before` it: Python files whose syntax trees are equal once docstrings are dropped
    (comments and layout are not in the tree), other files equal but for whitespace. A file on one side only,
    one that could not be read, and a changed Python file that does not parse are changes."""
    if before.keys() != after.keys():
        return False
    return all(_same_code(path, before[path], after[path]) for path in before)


def _same_code(path: str, old: str | None, new: str | None) -> bool:
    if old is None or new is None:
        return False
    if old == new:
        return True
    if not path.endswith((".py", ".pyi")):
        return "".join(old.split()) == "".join(new.split())
    old_tree = _code_tree(old)
    return old_tree is not None and old_tree == _code_tree(new)


def _code_tree(source: str) -> str | None:
    """The syntax tree of `source` without docstrings, as text; None when it does not parse within limits."""
    if len(source) > NOOP_PARSE_LIMIT:
        return None
    tree = parsed(source)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and \
                node.body and _is_docstring(node.body[0]):
            node.body = node.body[1:]
    try:
        return ast.dump(tree)
    except (RecursionError, MemoryError):  # a tree deep enough to parse can be too deep to print
        return None


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def clean_patch(text: str | None) -> str:
    """A model's answer to a diff: take the fenced ```diff block if there is one, drop text before the first
    header, normalise line endings, end with a newline. Returns "" when nothing diff-like is found."""
    if text is None:
        return ""
    text = text.replace("\r\n", "\n")
    fenced = [block for block in _FENCE.findall(text) if "+++ " in block or "diff --git" in block]
    if fenced:
        text = "\n".join(block.rstrip("\n") for block in fenced)
    found = (text.find(marker) for marker in ("diff --git ", "--- "))
    starts = [i for i in found if i == 0 or (i > 0 and text[i - 1] == "\n")]
    if not starts:
        return ""
    text = text[min(starts):]
    return text if text.endswith("\n") else text + "\n"


def strip_test_files(diff: str) -> tuple[str, list[str]]:
    """Drop the parts of a diff that touch test files; return (remaining diff, dropped paths)."""
    parsed = parse_patch(diff)
    if not parsed.files:
        return diff, []
    kept = [fp for fp in parsed.files if not (is_test_path(fp.path) or (fp.old_path and is_test_path(fp.old_path)))]
    dropped = [fp.path for fp in parsed.files if fp not in kept]
    return "".join(fp.text for fp in kept), dropped


def make_patch(diff: str) -> str:
    """The patch a solver submits: its diff without edits to test files (those are the evaluator's)."""
    return strip_test_files(diff)[0]


@dataclass
class FileChange:
    """One file of a patch, as `git apply --numstat` reads it."""

    old_path: str
    new_path: str
    """Both are the same path unless the patch renames or copies."""
    added: str
    deleted: str
    """Line counts, "-" for a binary file."""

    @property
    def paths(self) -> list[str]:
        """The path, or both ends of a rename or copy."""
        return [self.old_path] if self.old_path == self.new_path else [self.old_path, self.new_path]


class UnreadablePatch(ValueError):
    """git does not read the text as a patch (or reads it differently forwards and backwards)."""


def parse_numstat(out: bytes) -> list[tuple[str, str, str]]:
    """(added, deleted, path) records of `git apply --numstat -z` output."""
    records = []
    for record in out.split(b"\0")[:-1]:
        fields = record.decode("utf-8", "surrogateescape").split("\t", 2)
        if len(fields) != 3:
            raise UnreadablePatch(f"unexpected `git apply --numstat` record {record[:80]!r}")
        records.append((fields[0], fields[1], fields[2]))
    return records


def pair_numstat(forward: list[tuple[str, str, str]], backward: list[tuple[str, str, str]]) -> list[FileChange]:
    """The files of a patch from its forward and reversed (`-R`) numstat. Forward, git names the new path
    (the old one for a deletion); with -R, the old one (the new one for a creation), and lists the files last
    to first (the order a reversed patch applies in): together they name both ends."""
    backward = backward[::-1]
    if [(a, d) for a, d, _ in forward] != [(a, d) for d, a, _ in backward]:
        raise UnreadablePatch("git reads it differently forwards and backwards")
    return [FileChange(old, new, added, deleted) for (added, deleted, new), (_, _, old) in zip(forward, backward)]


async def git_patch_files(sandbox: Sandbox, diff: str) -> list[FileChange]:
    """The files `git apply` in the sandbox's workspace would touch (both ends of renames); UnreadablePatch
    when git does not read `diff` as a patch. Only git's reading counts: the same program that applies it."""
    text = diff if diff.endswith("\n") else diff + "\n"
    outputs = []
    for reverse in (False, True):
        result = await sandbox.exec(f"git apply --numstat -z {'-R ' if reverse else ''}-", stdin=text)
        if not result.ok:
            raise UnreadablePatch((result.output.strip().splitlines() or ["git apply --numstat failed"])[-1])
        if result.truncated:
            raise UnreadablePatch("git's list of the files it touches is too long to read")
        outputs.append(parse_numstat(result.stdout.encode("utf-8", "surrogateescape")))
    files = pair_numstat(outputs[0], outputs[1])
    for fc in files:
        for path in fc.paths:
            # a name the harness could not restore exactly (decoded with replacement) is no name a fix needs
            if not path.isprintable() or "\ufffd" in path:
                raise UnreadablePatch(f"it names a path with control or undecodable characters: {path!r}")
    return files


@dataclass
class ApplyResult:
    applied: bool
    command: str | None
    """The command that applied the patch (None when none did)."""
    log: str
    files: list[FileChange] = field(default_factory=list)
    """The files it touched, as git reads the patch (empty when it did not apply)."""


async def apply_patch(sandbox: Sandbox, diff: str) -> ApplyResult:
    """Apply `diff` in the workspace with `git apply` alone; a patch git does not read, or reads but cannot
    apply, is not applied (no lenient second tool: what it wrote would not be what git's reading says)."""
    text = diff if diff.endswith("\n") else diff + "\n"
    try:
        files = await git_patch_files(sandbox, text)
    except UnreadablePatch as exc:
        return ApplyResult(False, None, f"$ git apply --numstat -z -\n(git does not read it as a patch: {exc})")
    result = await sandbox.exec(APPLY_COMMAND + " -", stdin=text)
    log = f"$ {APPLY_COMMAND}\n(exit {result.exit_code})\n{result.output}"
    if not result.ok:
        return ApplyResult(False, None, log)
    return ApplyResult(True, APPLY_COMMAND, log, files)


async def workspace_diff(sandbox: Sandbox, base: str = "HEAD", *, exclude_tests: bool = True) -> str:
    """Diff of the workspace (tracked and new files) against `base`, optionally without test files."""
    script = (
        # `git add -A .` (not an exclude pathspec): git refuses to add a pathspec naming an ignored path.
        f"git add -A . >/dev/null 2>&1 && git -c core.quotepath=off diff --cached "
        f"--no-color --no-ext-diff {shlex.quote(base)} -- . ':(exclude){SCRATCH_DIR}'; status=$?; "
        "git reset -q >/dev/null 2>&1; exit $status"
    )
    result = await sandbox.exec(sh_command(script))
    if not result.ok:
        raise SandboxError(f"git diff failed in the workspace (exit {result.exit_code}): {result.output.strip()[-300:]}")
    diff = result.stdout
    return make_patch(diff) if exclude_tests else diff
