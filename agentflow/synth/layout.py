"""Which files of a repository are the package's source (mutated) and which are its tests (run).

Source, an allowlist: `.py` files inside a package (a folder with `__init__.py`) at the root or under `src/`,
or a top-level module there, but no test, docs, examples, benchmarks or build/tooling script. Tests: what
pytest collects by default (`test_*.py`, `*_test.py`).
"""

from __future__ import annotations

import re
from pathlib import Path

from agentflow.errors import UserError
from agentflow.swe.patch import is_test_path
from agentflow.swe.workspace import snapshot_files

_NOT_SOURCE_DIRS = {"tests", "test", "testing", "docs", "doc", "examples", "example", "benchmarks", "benchmark",
                    "scripts", "tools", "build", "dist", "site-packages"}
_NOT_SOURCE_MODULES = {"setup.py", "conftest.py", "noxfile.py", "fabfile.py", "tasks.py", "versioneer.py",
                       "__main__.py", "_version.py", "version.py", "__about__.py", "docs.py"}
_HIDDEN = re.compile(r"(^|/)\.")


def repo_files(root: Path) -> list[str]:
    """Every file of the repository a task snapshot holds (posix, relative, sorted). A symlink must point
    inside the repository (its content is copied into the tasks): else a one-line UserError."""
    real_root = root.resolve()

    def inside(path: Path, what: str) -> Path:
        real = path.resolve()
        if real != real_root and real_root not in real.parents:
            raise UserError(f"{what} {real} is outside the repository {root}", hint="remove the link or copy the file in")
        return real

    return [p.as_posix() for p in snapshot_files(root, inside)]


def source_files(root: Path, files: list[str] | None = None) -> list[str]:
    """The package's pure-Python source files (what bugs are injected into), sorted."""
    files = repo_files(root) if files is None else files
    out = []
    for rel in files:
        parts = rel.split("/")
        if not rel.endswith(".py") or _HIDDEN.search(rel) or is_test_path(rel):
            continue
        inner = parts[1:] if parts[0] == "src" else parts
        if not inner or any(p in _NOT_SOURCE_DIRS or p.startswith("test") for p in inner[:-1]):
            continue
        if inner[-1] in _NOT_SOURCE_MODULES:
            continue
        base = root / "src" if parts[0] == "src" else root
        if len(inner) > 1 and not all((base.joinpath(*inner[:i]) / "__init__.py").is_file() for i in range(1, len(inner))):
            continue  # not inside an importable package
        out.append(rel)
    return sorted(out)


def suite_files(files: list[str]) -> list[str]:
    """The files pytest would collect as tests by its default patterns, sorted."""
    out = []
    for rel in files:
        name = rel.rsplit("/", 1)[-1]
        if _HIDDEN.search(rel) or not name.endswith(".py"):
            continue
        if (name.startswith("test_") or name.endswith("_test.py")) and not rel.startswith(("build/", "dist/")):
            out.append(rel)
    return sorted(out)


def module_name(path: str) -> str:
    """`src/pkg/mod.py` -> `mod` (`pkg` for an `__init__.py`): how a test file would name it."""
    parts = path.removesuffix(".py").split("/")
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return parts[-1]


def reaching_tests(tests: dict[str, str], mutated: str, function: str) -> list[str]:
    """The test files that mention the mutated function (or its class), else its module, else all of them.

    A cheap stand-in for "the tests that reach the function": a file that never names it, its class or its
    module can still reach it (through a public caller), which only costs a candidate, never a wrong task."""
    words = [w for w in function.split(".") if not w.startswith("__")] or [module_name(mutated)]
    for names in (words, [module_name(mutated)]):
        found = [path for path, text in tests.items() if any(re.search(rf"\b{re.escape(n)}\b", text) for n in names)]
        if found:
            return sorted(found)
    return sorted(tests)
