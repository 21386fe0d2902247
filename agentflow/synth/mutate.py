"""Every single-site mutation of a package's source files, on the syntax tree: for bug injection (the task
synthesizer, `OPERATORS`) and as candidate fixes (the repair's `swe.mutants`, `REPAIR_OPERATORS`).

Each operator family finds its nodes with `ast` and rewrites only that node's source span (formatting kept):
one line changed or removed. A candidate is kept only when it still compiles and its syntax tree changed. The
order is the files', then `ast.walk`'s; the seed only picks among them.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from agentflow.pysyntax import parsed
from agentflow.synth.hide import definition_span

OPERATORS = (
    "flip-comparison",
    "off-by-one",
    "swap-boolean",
    "negate-condition",
    "remove-statement",
    "change-default",
    "swap-arguments",
    "wrong-return",
)
"""The procedural operator families (`--operators` picks among them)."""

REPAIR_OPERATORS = (
    "flip-comparison",
    "negate-condition",
    "drop-one",
    "shift-constant",
    "swap-arithmetic",
    "swap-boolean",
    "shift-name",
    "swap-arguments",
)
"""The single-site changes the repair tries as fixes without a model (`swe.mutants`), most often right first:
the mutation operators of mutation-based program repair (a boundary, a sign, a condition, an operator). A fault
that one of them, or one of the synthesizer's flip, off-by-one, negate and swap families, made is undone by
another of them."""

_COMPARE_FLIP: dict[type[ast.cmpop], tuple[str, str]] = {
    ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="), ast.GtE: (">=", ">"),
    ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="), ast.Is: ("is not", "is"), ast.IsNot: ("is not", "is"),
    ast.In: ("not in", "in"), ast.NotIn: ("not in", "in"),
}
"""Operator token to look for between the two operands, and its replacement. `is`/`in` look for the longer
token first (the segment of `a is not b` holds `is` too)."""
_MIN_LINE_CHARS = 4
"""A changed line shorter than this (stripped) is not a candidate: a problem statement could not be checked
for naming it."""


@dataclass(frozen=True)
class Mutation:
    """One candidate bug: lines `start`..`end` (1-based, inclusive) of `path` become `new_lines`."""

    path: str
    """File, relative to the repository root (posix)."""
    start: int
    end: int
    new_lines: tuple[str, ...]
    """Replacement lines, without line ends (empty: the lines are removed)."""
    operator: str
    function: str
    """`Class.method` or `function` that holds the change (the gold function)."""
    old_lines: tuple[str, ...]

    def apply(self, text: str) -> str:
        """`text` (the file's original content) with the mutation."""
        lines = text.splitlines(keepends=True)
        first = lines[self.start - 1]
        ending = first[len(first.rstrip("\r\n")) :] or "\n"  # the replaced line's own
        new = [line + ending for line in self.new_lines]
        return "".join(lines[: self.start - 1] + new + lines[self.end :])

    @property
    def key(self) -> str:
        return f"{self.path}:{self.start}:{self.operator}:{'|'.join(self.new_lines)}"


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, node) of every function and method, nested ones under their parent's name."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                yield name, child
                yield from walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


Splice = tuple[ast.AST, int, int, str]
"""(node whose line changes, start column, end column in the line's UTF-8 bytes, replacement text)."""


def _segment(lines: list[bytes], node: ast.AST) -> str | None:
    """The source text of a node that sits on one line, else None."""
    lineno, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    if lineno is None or lineno != end:
        return None
    text: str = lines[lineno - 1][node.col_offset : node.end_col_offset].decode("utf-8")  # type: ignore[attr-defined]
    return text


def _between(lines: list[bytes], left: ast.AST, right: ast.AST) -> tuple[int, int, str] | None:
    """(start, end, text) of the text between two nodes on one line (an operator token sits there)."""
    if left.end_lineno != right.lineno or left.lineno != right.end_lineno:  # type: ignore[attr-defined]
        return None
    start, end = left.end_col_offset, right.col_offset  # type: ignore[attr-defined]
    return start, end, lines[left.lineno - 1][start:end].decode("utf-8")  # type: ignore[attr-defined]


def _token_swap(node: ast.AST, lines: list[bytes], left: ast.AST, right: ast.AST, token: re.Pattern[str],
                new: str) -> Iterator[Splice]:
    """`token`, when it stands once between `left` and `right` on one line, replaced by `new`."""
    gap = _between(lines, left, right)
    if gap is not None and len(token.findall(gap[2])) == 1:
        yield node, gap[0], gap[1], token.sub(new, gap[2])


def _flip_comparison(node: ast.AST, lines: list[bytes]) -> Iterator[Splice]:
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        old, new = _COMPARE_FLIP[type(node.ops[0])]
        if isinstance(node.ops[0], (ast.Is, ast.In)):
            old, new = new, old
        token = re.compile(r"(?<![\w<>=!])" + re.escape(old).replace(r"\ ", r"\s+") + r"(?![\w<>=])")
        yield from _token_swap(node, lines, node.left, node.comparators[0], token, new)


def _off_by_one(node: ast.AST, lines: list[bytes]) -> Iterator[Splice]:
    bounds: list[ast.AST] = []
    if isinstance(node, ast.Slice):
        bounds = [b for b in (node.lower, node.upper) if b is not None]
    elif isinstance(node, ast.Subscript) and not isinstance(node.slice, (ast.Slice, ast.Tuple)):
        bounds = [node.slice]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
        bounds = list(node.args)
    elif isinstance(node, (ast.BinOp, ast.Compare)):
        bounds = [n for n in ([node.left, node.right] if isinstance(node, ast.BinOp) else node.comparators)
                  if isinstance(n, ast.Constant)]
    for bound in bounds:
        text = _segment(lines, bound)
        if text is None:
            continue
        if isinstance(bound, ast.Constant) and type(bound.value) is int:
            for value in (bound.value + 1, bound.value - 1):
                if value >= 0:
                    yield bound, bound.col_offset, bound.end_col_offset, str(value)  # type: ignore[misc]
        elif isinstance(bound, (ast.Name, ast.Attribute, ast.Call)) and not isinstance(node, ast.BinOp):
            yield bound, bound.col_offset, bound.end_col_offset, f"{text} + 1"  # type: ignore[misc]


def _swap_boolean(node: ast.AST, lines: list[bytes]) -> Iterator[Splice]:
    if isinstance(node, ast.BoolOp) and len(node.values) >= 2:
        old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        yield from _token_swap(node, lines, node.values[0], node.values[1], re.compile(rf"\b{old}\b"), new)


def _negate_condition(node: ast.AST, lines: list[bytes]) -> Iterator[Splice]:
    if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
        test = node.test
        text = _segment(lines, test)
        if text is None:
            return
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = _segment(lines, test.operand)
            if inner is not None:
                new = inner if isinstance(test.operand, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) else f"({inner})"
                yield test, test.col_offset, test.end_col_offset, new  # type: ignore[misc]
            return
        simple = isinstance(test, (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant))
        yield test, test.col_offset, test.end_col_offset, f"not {text}" if simple else f"not ({text})"  # type: ignore[misc]


def _change_default(node: ast.AST, lines: list[bytes]) -> Iterator[Splice]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        for default in [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]:
            if not isinstance(default, ast.Constant) or _segment(lines, default) is None:
                continue
            value = default.value
            if isinstance(value, bool):
                new = str(not value)
            elif isinstance(value, int):
                new = str(value + 1)
            else:
                continue
            yield default, default.col_offset, default.end_col_offset, new  # type: ignore[misc]


def _swap_arguments(node: ast.AST, lines: list[bytes]) -> Iterator[Splice]:
    if isinstance(node, ast.Call) and len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args[:2]):
        first, second = node.args[0], node.args[1]
        a, b = _segment(lines, first), _segment(lines, second)
        gap = _between(lines, first, second)
        if a is None or b is None or gap is None or a == b:
            return
        yield node, first.col_offset, second.end_col_offset, b + gap[2] + a  # type: ignore[misc]


def _wrong_return(node: ast.AST, lines: list[bytes]) -> Iterator[Splice]:
    if isinstance(node, ast.Return) and node.value is not None:
        value = node.value
        if _segment(lines, value) is None:
            return
        if isinstance(value, ast.Constant) and isinstance(value.value, bool):
            new = str(not value.value)
        elif isinstance(value, ast.Constant) and value.value is None:
            return
        else:
            new = "None"
        yield value, value.col_offset, value.end_col_offset, new  # type: ignore[misc]


def _shift_constant(node: ast.AST, lines: list[bytes]) -> Iterator[Splice]:
    """An integer literal one more, one less, or negated (a wrong bound, count, index or sign); not to 0 as
    the operand of `+` or `-` (`n - 0` is `drop-one`'s `n`)."""
    for child in ast.iter_child_nodes(node):
        if not (isinstance(child, ast.Constant) and type(child.value) is int) or _segment(lines, child) is None:
            continue
        value = child.value
        addend = isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) and child is node.right
        for new in dict.fromkeys((value + 1, value - 1, -value)):
            if new != value and not (addend and new == 0):
                yield child, child.col_offset, child.end_col_offset, str(new)  # type: ignore[misc]


def _drop_one(node: ast.AST, lines: list[bytes]) -> Iterator[Splice]:
    """`x + 1` or `x - 1` back to `x` (a bound shifted by one)."""
    if (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) and isinstance(node.right, ast.Constant)
            and type(node.right.value) is int and node.right.value == 1):
        left = _segment(lines, node.left)
        if left is not None and _segment(lines, node) is not None:
            yield node, node.col_offset, node.end_col_offset, left  # type: ignore[misc]


def _swap_arithmetic(node: ast.AST, lines: list[bytes]) -> Iterator[Splice]:
    """`+` and `-` swapped, in an expression or an augmented assignment (not on strings)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        if any(isinstance(n, ast.JoinedStr) or (isinstance(n, ast.Constant) and isinstance(n.value, str))
               for n in (node.left, node.right)):
            return  # text joined, not numbers
        old, new = ("+", "-") if isinstance(node.op, ast.Add) else ("-", "+")
        yield from _token_swap(node, lines, node.left, node.right, re.compile(re.escape(old)), new)
    elif isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Add, ast.Sub)):
        old, new = ("+=", "-=") if isinstance(node.op, ast.Add) else ("-=", "+=")
        yield from _token_swap(node, lines, node.target, node.value, re.compile(re.escape(old)), new)


_TIGHT = (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift, ast.BitAnd, ast.BitOr,
          ast.BitXor, ast.MatMult)
"""Operators that bind tighter than `-` and `+`: a shifted operand of theirs needs parentheses."""


def _shift_name(node: ast.AST, lines: list[bytes]) -> Iterator[Splice]:
    """A name used as a bound, index, argument, operand or compared value, one less or one more (`n` ->
    `n - 1`)."""
    operands: list[ast.AST | None] = []
    if isinstance(node, ast.Slice):
        operands = [node.lower, node.upper]
    elif isinstance(node, ast.Subscript) and not isinstance(node.slice, (ast.Slice, ast.Tuple)):
        operands = [node.slice]
    elif isinstance(node, ast.Call):
        operands = list(node.args)
    elif isinstance(node, ast.BinOp):
        operands = [node.left, node.right]
    elif isinstance(node, ast.Compare) and all(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in node.ops):
        operands = [node.left, *node.comparators]  # an ordering: an identity or membership test has no bound
    tight = isinstance(node, ast.BinOp) and isinstance(node.op, _TIGHT)
    for operand in operands:
        if not isinstance(operand, (ast.Name, ast.Attribute)) or (text := _segment(lines, operand)) is None:
            continue
        if isinstance(operand, ast.Name) and operand.id in ("self", "cls"):
            continue  # the instance or class itself is no number
        for sign in ("-", "+"):
            new = f"{text} {sign} 1"
            yield operand, operand.col_offset, operand.end_col_offset, f"({new})" if tight else new  # type: ignore[misc]


_SPLICERS: dict[str, Callable[[ast.AST, list[bytes]], Iterator[Splice]]] = {
    "flip-comparison": _flip_comparison,
    "off-by-one": _off_by_one,
    "swap-boolean": _swap_boolean,
    "negate-condition": _negate_condition,
    "change-default": _change_default,
    "swap-arguments": _swap_arguments,
    "wrong-return": _wrong_return,
    "shift-constant": _shift_constant,
    "drop-one": _drop_one,
    "swap-arithmetic": _swap_arithmetic,
    "shift-name": _shift_name,
}


def _removable(func: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.stmt]:
    """Single-line simple statements in a block that keeps another statement once they are gone."""
    for node in ast.walk(func):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list) or len(block) < 2:
                continue
            for stmt in block:
                if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.Expr)) and stmt.lineno == stmt.end_lineno:
                    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                        continue  # a docstring or a bare constant: removing it changes no behaviour
                    if isinstance(stmt, ast.Assign) and not _reassigns(func, stmt):
                        continue  # the first binding of a name: removing it is a NameError, not a bug to find
                    yield stmt


def _reassigns(func: ast.FunctionDef | ast.AsyncFunctionDef, stmt: ast.Assign) -> bool:
    """True when every name `stmt` binds is bound (or is a parameter) before it in the function."""
    targets = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if len(targets) != len(stmt.targets):
        return True  # an attribute or item assignment: a state change, not a first binding
    params = {a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]}
    earlier = {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
               and n.lineno < stmt.lineno}
    return all(t in params or t in earlier for t in targets)


def file_mutations(path: str, text: str, operators: tuple[str, ...] = OPERATORS) -> list[Mutation]:
    """Every mutation of one source file by the given operator families, in a fixed order."""
    tree = parsed(text)
    if tree is None:
        return []
    lines = [line.encode("utf-8") for line in text.splitlines()]
    out: list[Mutation] = []
    seen: set[str] = set()
    owners = _line_owners(tree)
    original: dict[tuple[int, int], str | None] = {}
    for qualname, func in _functions(tree):
        span = definition_span(func)
        body_nodes = [n for stmt in func.body for n in ast.walk(stmt)]
        for op in operators:
            if op == "remove-statement":
                for stmt in _removable(func):
                    if owners.get(stmt.lineno) == qualname:
                        _add(out, seen, _removal(path, lines, stmt, qualname), text, span, original)
                continue
            nodes = [func] if op == "change-default" else body_nodes
            for node in nodes:
                for target, start, end, new in _SPLICERS[op](node, lines):
                    if owners.get(target.lineno) == qualname or op == "change-default":  # type: ignore[attr-defined]
                        _add(out, seen, _splice(path, lines, target, start, end, new, op, qualname), text, span, original)
    return out


def _line_owners(tree: ast.Module) -> dict[int, str]:
    """Line -> the innermost function holding it (a nested function's lines are its own, not its parent's)."""
    owners: dict[int, str] = {}
    for qualname, func in _functions(tree):  # parents come first: nested functions overwrite their lines
        for line in range(func.lineno, (func.end_lineno or func.lineno) + 1):
            owners[line] = qualname
    return owners


def _splice(path: str, lines: list[bytes], node: ast.AST, start: int, end: int, new: str, op: str,
            qualname: str) -> Mutation | None:
    lineno = node.lineno  # type: ignore[attr-defined]
    line = lines[lineno - 1]
    changed = (line[:start] + new.encode("utf-8") + line[end:]).decode("utf-8")
    old = line.decode("utf-8")
    if changed == old:
        return None
    return Mutation(path, lineno, lineno, (changed,), op, qualname, (old,))


def _removal(path: str, lines: list[bytes], stmt: ast.stmt, qualname: str) -> Mutation | None:
    old = lines[stmt.lineno - 1].decode("utf-8")
    if old[: stmt.col_offset].strip() or old[stmt.end_col_offset or 0 :].split("#", 1)[0].strip():
        return None  # another statement shares the line
    return Mutation(path, stmt.lineno, stmt.lineno, (), "remove-statement", qualname, (old,))


def _add(out: list[Mutation], seen: set[str], mutation: Mutation | None, text: str, span: tuple[int, int],
         original: dict[tuple[int, int], str | None]) -> None:
    """Keep a mutation when its function still parses and its syntax tree changed (checked on the function
    alone: parsing the whole file for each candidate of a large module costs seconds) and its changed line is
    not too short (`_MIN_LINE_CHARS`)."""
    if mutation is None or mutation.key in seen or len(mutation.old_lines[0].strip()) < _MIN_LINE_CHARS:
        return
    seen.add(mutation.key)
    first, last = span
    lines = text.splitlines()
    if span not in original:  # the function's own tree, parsed once for all its candidates
        original[span] = _parsed(lines[first - 1 : last])
    before = original[span]
    changed = lines[first - 1 : mutation.start - 1] + list(mutation.new_lines) + lines[mutation.end : last]
    if before is not None:
        after = _parsed(changed)
    else:  # the function does not parse alone (a string literal less indented than it): the whole file
        before, after = _parsed(lines), _parsed(mutation.apply(text).splitlines())
    if after is not None and after != before:
        out.append(mutation)


def _parsed(lines: list[str]) -> str | None:
    """The dump of the syntax tree of `lines` (dedented), or None when they do not compile."""
    tree = parsed(textwrap.dedent("\n".join(lines)), compiles=True)
    return None if tree is None else ast.dump(tree)
