"""The pre-flight reads a pytest suite's collection errors file by file (`swe.preflight.read_collection_errors`):
a test file needing a module from outside the repository is left out (`optional_module`), or, when the import
passes through the package, left out only if the rest of the suite then runs (`package_dependency`, decided by
`run_preflight`); an error raised by, or naming, the repository's own package is its code's failing behaviour;
anything else is a set-up failure. Each case is a real repository layout collected by a real pytest run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentflow.swe.preflight import RepoModules, ignoring, read_collection_errors

GOOD_CORE = "def f():\n    return 1\n"
GOOD_TEST = "from pager import f\n\n\ndef test_f():\n    assert f() == 1\n"

# (name, {path: text} over the good repository, {test file: kind expected})
CASES = [
    ("test file imports an absent module", {"tests/test_opt.py": "import absent_dep\n\n\ndef test_o():\n    pass\n"},
     {"tests/test_opt.py": "optional_module"}),
    ("test file imports an absent dotted module", {"tests/test_opt.py": "from absent_dep.sub import x\n"},
     {"tests/test_opt.py": "optional_module"}),
    ("package imports an absent module", {"pager/core.py": "import absent_dep\n" + GOOD_CORE},
     {"tests/test_pager.py": "package_dependency"}),
    ("a submodule of the package imports an absent module",
     {"pager/diagram.py": "import absent_dep\n", "tests/test_diagram.py": "import pager.diagram\n"},
     {"tests/test_diagram.py": "package_dependency"}),
    ("package raises at import", {"pager/core.py": GOOD_CORE + "raise RuntimeError('boom')\n"},
     {"tests/test_pager.py": "own_code"}),
    ("package has a syntax error", {"pager/core.py": "def f(:\n"}, {"tests/test_pager.py": "own_code"}),
    ("package imports its own missing submodule", {"pager/core.py": "from pager import gone\n" + GOOD_CORE},
     {"tests/test_pager.py": "own_code"}),
    ("test imports a name its package lacks", {"tests/test_name.py": "from pager import nope\n"},
     {"tests/test_name.py": "own_code"}),
    ("test imports a missing submodule of its package", {"tests/test_sub.py": "import pager.gone\n"},
     {"tests/test_sub.py": "own_code"}),
    ("test file has a syntax error", {"tests/test_bad.py": "def test_(:\n"}, {"tests/test_bad.py": "setup"}),
    ("test file raises at import", {"tests/test_bad.py": "raise RuntimeError('x')\n"},
     {"tests/test_bad.py": "setup"}),
    ("test helper imports an absent module",
     {"tests/helpers.py": "import absent_dep\n", "tests/test_h.py": "from helpers import x\n"},
     {"tests/test_h.py": "optional_module"}),
    ("both an optional module and the package raising",
     {"tests/test_opt.py": "import absent_dep\n", "pager/core.py": GOOD_CORE + "raise ValueError('v')\n"},
     {"tests/test_opt.py": "optional_module", "tests/test_pager.py": "own_code"}),
]


def collect(root: Path, files: dict[str, str], *, src: bool) -> tuple[str, RepoModules]:
    layout = {"pager/__init__.py": "from pager.core import f\n", "pager/core.py": GOOD_CORE,
              "tests/test_pager.py": GOOD_TEST, **files}
    for path, text in layout.items():
        where = root / (f"src/{path}" if src and path.startswith("pager/") else path)
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text(text)
    paths = frozenset(p.relative_to(root).as_posix() for p in root.rglob("*.py"))
    env = {"PYTHONPATH": str(root / "src") if src else str(root), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:asyncio",
                          "--rootdir", str(root), "tests"],
                         check=False, cwd=root, capture_output=True, text=True, env=env, timeout=120)
    return run.stdout, RepoModules(files=paths)


@pytest.mark.parametrize("src", [False, True], ids=["flat", "src"])
@pytest.mark.parametrize(("name", "files", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_collection_error_is_classified(tmp_path: Path, name: str, files: dict[str, str],
                                             expected: dict[str, str], src: bool):
    output, repo = collect(tmp_path, files, src=src)
    found = {e.path: e.kind for e in read_collection_errors(output, repo)}
    assert found == expected, output[-3000:]


def test_left_out_files_reach_pytest_through_its_addopts():
    assert ignoring(None, []) is None
    assert ignoring({"A": "1"}, ["tests/test x.py"]) == {"A": "1", "PYTEST_ADDOPTS": "--ignore='tests/test x.py'"}
    assert ignoring({"PYTEST_ADDOPTS": "-p foo"}, ["t.py"]) == {"PYTEST_ADDOPTS": "-p foo --ignore=t.py"}
