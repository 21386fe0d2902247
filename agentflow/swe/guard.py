"""Keep a model patch from grading itself: test-infrastructure files go back to the base commit.

A patch that adds a root `conftest.py` forcing every outcome to "passed", a plugin module plus
`addopts = -p plugin` in `pytest.ini`, a `sitecustomize.py` or a `.pth` file would be graded resolved if the
harness ran the tests over it. So before the tests run, every such file that the model patch adds or
changes is restored from the base commit (or removed, when the base has none), and the report names them.

So is a module the patch adds that would stand in for the test runner or the standard library: a `pytest.py`,
`_pytest/__init__.py`, `pluggy.py` or `json.py` at the root of the repository, under `src/`, in a `pythonpath`
entry of the base's pytest configuration or next to the task's test files, all places that are on sys.path
while the tests run. (The harness also starts pytest so that such a module is not imported in its place,
`swe/testrun.py`; this removes it for commands it does not start, and for what is imported later.) A module
that the base commit already has there is the repository's own code, e.g. pytest's own `src/_pytest`, and
stays as the patch left it.

Which files: decided on the host, from the host's own parse of the patch (never from what the sandbox says
changed). The files themselves are restored with git inside the sandbox, where no model-written code has
run yet in `eval` (the patch went in through `git apply`).
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath

from agentflow.sandbox.base import Sandbox, sh_command
from agentflow.swe.patch import SCRATCH_DIR, FilePatch, parse_patch
from agentflow.swe.testrun import PLUGIN_NAME, RUNNER_NAME, test_files

INFRA_NAMES = frozenset(
    {"conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", "sitecustomize.py", "usercustomize.py"}
)
"""File names that configure or hook into pytest or the interpreter wherever they are in the tree."""
CONFIG_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
"""Files whose pytest section may name plugins (`-p NAME` in `addopts`) and folders for sys.path (`pythonpath`)."""
_PLUGIN_FLAG = re.compile(r"(?:^|\s)-p\s*([A-Za-z_][\w.]*)")
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


def plugin_modules(texts: Iterable[str]) -> set[str]:
    """Module names given to pytest with `-p NAME` in config texts or a test command (`no:x` excluded)."""
    found: set[str] = set()
    for text in texts:
        found.update(_PLUGIN_FLAG.findall(text))
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


def _creates(fp: FilePatch) -> bool:
    """The patch makes `fp.new_path` a file the base does not have there (new, renamed or copied to)."""
    header = fp.text.split("\n@@", 1)[0]
    return fp.new_path is not None and (fp.old_path is None or fp.old_path != fp.new_path or "new file mode" in header)


def _module_of(path: str) -> str | None:
    p = PurePosixPath(path)
    if p.suffix != ".py":
        return None
    parts = list(p.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) if parts else None


def infra_paths(patch: str, plugins: Iterable[str] = (), roots: Iterable[str] = PATH_ROOTS) -> list[str]:
    """Paths the patch adds, changes, deletes or renames that belong to the test infrastructure, and modules
    it adds in one of `roots` (folders on sys.path) that would stand in for the runner or the standard library."""
    plugins, roots = set(plugins), list(roots)
    out: list[str] = []
    for fp in parse_patch(patch).files:
        for path in {fp.old_path, fp.new_path} - {None}:
            assert path is not None
            name = PurePosixPath(path).name
            module = _module_of(path)
            hit = (
                name in INFRA_NAMES
                or name.endswith(".pth")
                or path.split("/", 1)[0] == SCRATCH_DIR
                # `-p pkg.plugin` may live at the root or under src/
                or (module is not None and any(module == m or module.endswith("." + m) for m in plugins))
                or (path == fp.new_path and _creates(fp) and shadowed_module(path, roots) is not None)
            )
            if hit and path not in out:
                out.append(path)
    return out


async def _base_configs(sandbox: Sandbox, base: str) -> list[str]:
    """The texts of the base commit's pytest configuration files."""
    texts = []
    for name in CONFIG_FILES:
        res = await sandbox.exec(f"git show {shlex.quote(f'{base}:{name}')}")
        if res.ok:
            texts.append(res.stdout)
    return texts


async def restore_test_infra(
    sandbox: Sandbox, patch: str, *, base: str = "HEAD", test_cmd: str | None = None, test_ids: Sequence[str] = ()
) -> list[str]:
    """Put every test-infrastructure file the patch touched back as it is at `base`; return those paths.

    `test_ids`: the tests that will run; pytest puts their folders on sys.path too."""
    if not patch.strip():
        return []
    configs = await _base_configs(sandbox, base)
    plugins = plugin_modules([test_cmd or "", *configs])
    test_dirs = {str(PurePosixPath(f).parent) for f in test_files(test_ids)}
    roots = {*PATH_ROOTS, *pythonpath_roots(configs), *("" if d == "." else d for d in test_dirs)}
    paths = infra_paths(patch, plugins, sorted(roots))
    for path in paths:
        q, ref = shlex.quote(path), shlex.quote(f"{base}:{path}")
        script = f"if git cat-file -e {ref} 2>/dev/null; then git checkout -q {shlex.quote(base)} -- {q}; else rm -rf -- {q}; fi"
        res = await sandbox.exec(sh_command(script))
        if not res.ok:
            from agentflow.errors import SandboxError

            raise SandboxError(f"could not restore {path} from the base commit: {res.output.strip()[-200:]}")
    return paths
