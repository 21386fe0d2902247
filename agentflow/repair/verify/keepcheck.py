"""A keep-working check: a model-written script of what a fix must not change, cut down to what holds today.

Asked for what works today and must keep working, a small model often mixes in the reported case itself
(an assertion of the broken behaviour beside assertions of what really works). So the script is not kept or
refused whole: each top-level check (an `assert`, a `try`, a loop, a bare call) runs on its own at the base commit,
and the check kept is the script without those that failed there. What is left passes on the unchanged code
by construction, and is run again to make sure (`Workbench.install_keep_check`).

The script runs in the sandbox and its output is read as data: a line naming a check as passed only decides
which statements the check keeps, and the cut-down script must then pass at the base commit on its own.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping

from agentflow.pysyntax import parsed
from agentflow.repair.locate.spectrum import module_of
from agentflow.swe.patch import is_test_path

MARKER = "AGENTFLOW_CHECK_PASSED"
"""The instrumented script prints it with a check's number after each check that ran without error."""
_SETUP = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.FunctionDef,
          ast.AsyncFunctionDef, ast.ClassDef)
"""Top-level statements that set a check up rather than check something: they run as written."""


def _checks(tree: ast.Module) -> list[int]:
    """Indexes of the module's top-level statements that check something (all but set-up)."""
    return [i for i, node in enumerate(tree.body) if not isinstance(node, _SETUP)]


def why_not_a_keep_check(script: str, sources: Mapping[str, str]) -> str | None:
    """None when a script can be a keep-working check: it parses, imports one of the repository's own
    modules (a check of plain Python keeps nothing of the package) and checks something at top level."""
    tree = parsed(script)
    if tree is None:
        return "the script does not parse"
    packages = {module.split(".")[0] for path in sources if not is_test_path(path) and (module := module_of(path))}
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and not node.level}
    if not imported & packages:
        return "it imports none of the package's modules"
    if not _checks(tree):
        return "it checks nothing at top level"
    return None


def instrumented(script: str) -> str:
    """`script` with each top-level check run on its own: an error in one is caught and printed, and one that
    passes prints `MARKER` and its number. Set-up statements run as written (one that fails stops the script)."""
    tree = parsed(script)
    if tree is None:
        return script
    body: list[ast.stmt] = []
    for i, node in enumerate(tree.body):
        if isinstance(node, _SETUP):
            body.append(node)
            continue
        wrapper = ast.parse(
            f"try:\n    pass\nexcept Exception as _exc:\n"
            f"    print('check {i} (line {node.lineno}) failed:', type(_exc).__name__, _exc, flush=True)\n"
            f"else:\n    print({MARKER + ' ' + str(i)!r}, flush=True)\n"
        ).body[0]
        assert isinstance(wrapper, ast.Try)
        wrapper.body = [node]
        body.append(wrapper)
    return ast.unparse(ast.fix_missing_locations(ast.Module(body=body, type_ignores=[])))


def passed_checks(output: str) -> set[int]:
    """The numbers of the checks the instrumented script says passed."""
    return {int(n) for n in re.findall(rf"^{MARKER} (\d+)$", output, re.MULTILINE)}


def passing_only(script: str, passed: set[int]) -> str | None:
    """`script` without the checks that did not pass; None when none did."""
    tree = parsed(script)
    if tree is None:
        return None
    checks = set(_checks(tree))
    if not checks & passed:
        return None
    body = [node for i, node in enumerate(tree.body) if i not in checks or i in passed]
    return ast.unparse(ast.Module(body=body, type_ignores=[])) + "\n"
