"""Grading by allowlist: a model patch is graded on the library code it changes, nothing else.

A patch graded by running tests can try to grade itself (a forcing `conftest.py`, a pytest configuration
under any name, a `.pth`, an entry-point plugin, a module standing in for pytest): a denylist of such names
misses the next one. So before the tests run every file the patch touched that is NOT library source
(`is_library_path`) is put back as the base commit has it, or removed, and the report names it
(`restored_files`). Which files it touched is git's own reading of the patch (`swe.patch.git_patch_files`).
The rule, path by path, is in docs/security.md ("An allowlist, not a denylist").
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from agentflow.errors import SandboxError
from agentflow.sandbox.base import Sandbox, sh_command
from agentflow.swe.patch import FileChange, git_patch_files, is_test_path
from agentflow.swe.testrun import PLUGIN_NAME, RUNNER_NAME, test_files

LIBRARY_SUFFIXES = frozenset(
    {".py", ".pyi", ".json", ".txt", ".csv", ".html", ".md", ".rst", ".yaml", ".yml", ".xml", ".jinja", ".j2"}
)
"""What a library file may be: Python source, and plain data that nothing reads unless the code asks."""
LOADED_BY_ITSELF = frozenset({"conftest.py", "setup.py", "sitecustomize.py", "usercustomize.py"})
"""Names Python, pytest or packaging load without being asked by the code under test."""
CONFIG_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
"""Files whose pytest section may name plugins (`-p NAME` in `addopts`) and folders for sys.path (`pythonpath`)."""
_PLUGIN_FLAG = re.compile(r"(?:^|\s)-p\s*([A-Za-z_][\w.]*)")
_PYTEST_PLUGINS = re.compile(r"pytest_plugins\s*=\s*(\[[^\]]*\]|\([^)]*\)|\"[^\"]*\"|'[^']*')")
RUNNER_MODULES = frozenset(
    {"pytest", "_pytest", "pluggy", "py", "iniconfig", "packaging", "exceptiongroup", "tomli", "attr", "attrs",
     "more_itertools", "atomicwrites", "colorama", "pygments", PLUGIN_NAME, RUNNER_NAME}
)
"""Top-level modules of pytest, its dependencies and the harness's own files."""
SHADOWED_MODULES = RUNNER_MODULES | frozenset(sys.stdlib_module_names)
"""Names a module added to a folder on sys.path must not take (the runner's and the standard library's)."""
PATH_ROOTS = ("", "src")
"""Folders on sys.path in every run: the repository root (`python -m pytest`) and a `src/` layout."""
_MODULE_SUFFIXES = (".py", ".pyc", ".pyo", ".pyw", ".so", ".pyd")
_PYTHONPATH_INI = re.compile(r"^\s*pythonpath\s*=\s*(.+)$", re.MULTILINE)
_BATCH = 50_000
"""Characters of paths per restoring shell command (one argument may hold 128 KiB on Linux)."""


def plugin_modules(texts: Iterable[str]) -> set[str]:
    """Module names given to pytest with `-p NAME` or listed in `pytest_plugins = ...` (`no:x` excluded)."""
    found: set[str] = set()
    for text in texts:
        found.update(_PLUGIN_FLAG.findall(text))
        for value in _PYTEST_PLUGINS.findall(text):
            found.update(re.findall(r"[\"']([A-Za-z_][\w.]*)[\"']", value))
    return found


def pythonpath_roots(texts: Iterable[str]) -> set[str]:
    """Folders that `pythonpath = ...` in pytest config texts puts on sys.path ("" for the root)."""
    roots: set[str] = set()
    for text in texts:
        for value in _PYTHONPATH_INI.findall(text):
            quoted = re.findall(r"[\"']([^\"']+)[\"']", value) if "[" in value else value.split()
            for entry in quoted:
                entry = entry.strip().removeprefix("./").rstrip("/")
                if not entry.startswith("/") and ".." not in entry.split("/"):
                    roots.add("" if entry == "." else entry)
    return roots


def shadowed_module(path: str, roots: Iterable[str]) -> str | None:
    """The runner or standard-library module that `path` would stand in for from one of `roots`, if any."""
    for root in roots:
        if root and not path.startswith(root + "/"):
            continue
        parts = path[len(root) + 1 :].split("/") if root else path.split("/")
        if len(parts) == 1 and parts[0].endswith(_MODULE_SUFFIXES):
            name = parts[0].split(".", 1)[0]  # json.py, json.cpython-311-x86_64-linux-gnu.so
        elif len(parts) == 2 and parts[1].startswith("__init__."):
            name = parts[0]
        else:
            continue
        if name in SHADOWED_MODULES:
            return name
    return None


def _module_of(path: str) -> str | None:
    p = PurePosixPath(path)
    if p.suffix != ".py":
        return None
    parts = list(p.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) if parts else None


def root_markers(path: str) -> list[str]:
    """Base-commit paths any one of which makes `path` lie in a package root: the package's `__init__.py`
    (`pkg/` or `src/pkg/`), or, for a top-level module (`six.py`, `src/six.py`), the module itself."""
    parts = PurePosixPath(path).parts
    markers = [path] if len(parts) == 1 else [f"{parts[0]}/__init__.py"]
    if parts[0] == "src" and len(parts) >= 2:
        markers.append(path if len(parts) == 2 else f"src/{parts[1]}/__init__.py")
    return markers


@dataclass
class BaseFacts:
    """What the base commit says about where library code is and what pytest loads."""

    existing: set[str] = field(default_factory=set)
    """The touched paths and their `root_markers` that the base commit has (as files)."""
    plugins: set[str] = field(default_factory=set)
    """Modules loaded as pytest plugins (`-p` in the base config or test command, `pytest_plugins`)."""
    sys_path: list[str] = field(default_factory=lambda: list(PATH_ROOTS))
    """Folders on sys.path while the tests run ("" for the root)."""
    test_files: set[str] = field(default_factory=set)
    """Files of the tests that will run."""


def is_library_path(path: str, facts: BaseFacts, *, created: bool) -> bool:
    """Whether `path`, touched by a patch, is library source of the repository (docs/security.md's rule);
    `created`: the patch makes it a file the base does not have there."""
    p = PurePosixPath(path)
    if not path or path.startswith("/") or ".." in p.parts or p.suffix not in LIBRARY_SUFFIXES:
        return False
    if not any(marker in facts.existing for marker in root_markers(path)):
        return False
    if p.name in LOADED_BY_ITSELF or is_test_path(path) or path in facts.test_files:
        return False
    if any(part.startswith(".") or part == "__pycache__" or part.endswith((".dist-info", ".egg-info"))
           for part in p.parts):
        return False
    module = _module_of(path)
    if module is not None and any(module == m or module.endswith("." + m) for m in facts.plugins):
        return False
    return not (created and shadowed_module(path, facts.sys_path) is not None)


def not_library(files: Sequence[FileChange], facts: BaseFacts) -> list[str]:
    """Every path (both ends of renames) of `files` that is not library source, in patch order."""
    out: list[str] = []
    for fc in files:
        for path in fc.paths:
            created = path == fc.new_path and (fc.old_path != fc.new_path or path not in facts.existing)
            if path not in out and not is_library_path(path, facts, created=created):
                out.append(path)
    return out


async def _base_text(sandbox: Sandbox, command: str) -> str:
    res = await sandbox.exec(command)
    return res.stdout if res.ok else ""


async def base_facts(sandbox: Sandbox, files: Sequence[FileChange], *, base: str, test_cmd: str | None,
                     test_ids: Sequence[str], plugins: Sequence[str] = ()) -> BaseFacts:
    """Read from the base commit (git in the sandbox) what `is_library_path` needs for these files."""
    touched = {p for fc in files for p in fc.paths}
    asked = sorted({m for p in touched for m in root_markers(p)} | touched)
    listing = await sandbox.exec(
        "git cat-file --batch-check='%(objecttype)' --buffer",
        stdin="".join(f"{base}:{p}\n" for p in asked),
    )
    if not listing.ok or listing.truncated:
        raise SandboxError(f"could not list the base commit's files: {listing.output.strip()[-200:]}")
    answers = listing.stdout.splitlines()
    existing = {p for p, kind in zip(asked, answers) if kind == "blob"}
    configs = [await _base_text(sandbox, f"git show {shlex.quote(f'{base}:{name}')}") for name in CONFIG_FILES]
    declared = await _base_text(sandbox, sh_command(
        f"git grep -h -I -A 30 -e pytest_plugins {shlex.quote(base)} -- '*.py' | head -c 1000000"))
    test_dirs = {str(PurePosixPath(f).parent) for f in test_files(test_ids)}
    return BaseFacts(
        existing=existing,
        plugins=plugin_modules([test_cmd or "", *configs, declared]) | set(plugins),
        sys_path=sorted({*PATH_ROOTS, *pythonpath_roots(configs), *("" if d == "." else d for d in test_dirs)}),
        test_files=set(test_files(test_ids)),
    )


async def restore_test_infra(
    sandbox: Sandbox, patch: str, *, base: str = "HEAD", test_cmd: str | None = None, test_ids: Sequence[str] = (),
    files: Sequence[FileChange] | None = None, plugins: Sequence[str] = (),
) -> list[str]:
    """Put every file the patch touched that is not library source back as it is at `base` (remove it when
    `base` has none); return those paths. `files`: git's reading of the patch (`ApplyResult.files`), read
    again with git when not given. `test_ids`: the tests that will run; `plugins`: the task's named plugins."""
    if not patch.strip():
        return []
    if files is None:
        files = await git_patch_files(sandbox, patch)
    if not files:
        return []
    facts = await base_facts(sandbox, files, base=base, test_cmd=test_cmd, test_ids=test_ids, plugins=plugins)
    paths = not_library(files, facts)
    await _restore(sandbox, paths, base)
    return paths


async def _restore(sandbox: Sandbox, paths: Sequence[str], base: str) -> None:
    """Each of `paths` as at `base`, or absent; deepest first (a file the patch put below a path that the base
    has as a file goes before that file comes back). Fails loudly when one is not so afterwards."""
    ref = shlex.quote(base)
    steps = []
    for path in sorted(paths, key=lambda p: (-p.count("/"), p)):
        q, obj = shlex.quote(path), shlex.quote(f"{base}:{path}")
        steps.append(
            f"rm -rf -- {q} 2>/dev/null; if git cat-file -e {obj} 2>/dev/null; then "
            f"git --literal-pathspecs checkout -q {ref} -- {q} || {{ echo {q}; exit 1; }}; "
            f"elif [ -e {q} ] || [ -L {q} ]; then echo {q}; exit 1; fi"
        )
    batch: list[str] = []
    for step in [*steps, None]:
        if step is not None and sum(map(len, batch)) + len(step) < _BATCH:
            batch.append(step)
            continue
        if batch:
            res = await sandbox.exec(sh_command("; ".join(batch)))
            if not res.ok:
                raise SandboxError(f"could not restore {res.output.strip()[-200:]} from the base commit")
        batch = [step] if step is not None else []
