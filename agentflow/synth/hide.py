"""Hidden tests (`agentflow tasks synth --hide-tests`): the failing tests leave the task's repository.

SWE-bench's situation: a user reports a behaviour, the repository's suite passes at the base, and the tests
that check the fix come in at grading through the task's `test_patch`. Here the FAIL_TO_PASS test functions
(a parametrized id stands for its one function) are cut from their files by their syntax-tree line span,
decorators included; `test_patch` is the diff that puts them back.
"""

from __future__ import annotations

import ast
import textwrap

from agentflow.pysyntax import parsed

_Defined = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def function_of(test_id: str) -> tuple[str, tuple[str, ...]] | None:
    """(file, names from the module down to the function) of a test id; its parameters dropped."""
    path, *names = test_id.split("::")
    if not names:
        return None
    names[-1] = names[-1].split("[", 1)[0]
    return path, tuple(names)


def hidden_functions(test_ids: list[str]) -> dict[str, list[tuple[str, ...]]]:
    """The test functions behind `test_ids`, by file, each once, in a stable order."""
    by_file: dict[str, set[tuple[str, ...]]] = {}
    for test_id in test_ids:
        found = function_of(test_id)
        if found is not None:
            by_file.setdefault(found[0], set()).add(found[1])
    return {path: sorted(names) for path, names in sorted(by_file.items())}


def is_hidden(test_id: str, hidden: dict[str, list[tuple[str, ...]]]) -> bool:
    """True when `test_id` runs one of the hidden functions (another parameter of a hidden test counts)."""
    found = function_of(test_id)
    return found is not None and found[1] in hidden.get(found[0], [])


def _find(tree: ast.Module, names: tuple[str, ...]) -> tuple[_Defined, ast.AST] | None:
    """The definition `names` leads to and its parent (None when it is not defined right there: an inherited
    or generated test cannot be cut)."""
    node: ast.AST = tree
    parent: ast.AST = tree
    for name in names:
        found = [c for c in ast.iter_child_nodes(node) if isinstance(c, _Defined) and c.name == name]
        if not found:
            return None
        parent, node = node, found[0]
    assert isinstance(node, _Defined)
    return node, parent


def test_definition(text: str, test_id: str) -> _Defined | None:
    """The definition of the test function `test_id` names, in its file's `text` (None: not defined there)."""
    found, tree = function_of(test_id), parsed(text)
    defined = _find(tree, found[1]) if found is not None and tree is not None else None
    return defined[0] if defined is not None else None


def definition_span(node: _Defined) -> tuple[int, int]:
    """First and last line (1-based) of a definition, its decorators included."""
    start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
    return start, node.end_lineno or node.lineno


def indent_of(line: str) -> str:
    """The leading whitespace of `line`."""
    return line[: len(line) - len(line.lstrip())]


def cut_functions(text: str, functions: list[tuple[str, ...]]) -> str | None:
    """`text` without the named test functions and the blank lines after them; None when one is not defined
    in this file. A class left with no statement gets a `pass`, so the file still imports."""
    tree = parsed(text)
    if tree is None:
        return None
    lines = text.splitlines(keepends=True)
    cut: dict[int, int] = {}
    emptied: dict[int, ast.AST] = {}
    parents: dict[int, tuple[ast.AST, list[_Defined]]] = {}
    for names in functions:
        found = _find(tree, names)
        if found is None:
            return None
        node, parent = found
        start, end = definition_span(node)
        while end < len(lines) and not lines[end].strip():
            end += 1
        cut[start] = end
        parents.setdefault(id(parent), (parent, []))[1].append(node)
    for parent, nodes in parents.values():
        body = getattr(parent, "body", [])
        if isinstance(parent, ast.ClassDef) and len(nodes) == len(body):
            emptied[definition_span(nodes[0])[0]] = parent
    kept: list[str] = []
    line = 1
    while line <= len(lines):
        if line in cut:
            if line in emptied:
                kept.append(f"{indent_of(lines[line - 1])}pass\n\n")
            line = cut[line] + 1
            continue
        kept.append(lines[line - 1])
        line += 1
    return "".join(kept)


def snippet_of(text: str, test_id: str) -> str:
    """The statements of the test `test_id` names (no `def` line, decorators or docstring), dedented ("" if not
    found)."""
    node = test_definition(text, test_id)
    if node is None or not node.body:
        return ""
    body = node.body[1:] if ast.get_docstring(node) is not None and len(node.body) > 1 else node.body
    lines = text.splitlines()[body[0].lineno - 1 : node.end_lineno]
    return textwrap.dedent("\n".join(lines)).strip("\n")
