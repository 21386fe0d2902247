"""Simple route conditions over state fields, e.g. `count >= rounds and status != "failed"`.

Only comparisons, `and`/`or`/`not`, `in`, literals, state field names and `a.b` field access are allowed;
anything else is rejected when the workflow is validated (never eval'd).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Mapping
from typing import Any

from agentflow.errors import UserError

_CMP: dict[type, Any] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
_ALLOWED = (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.Name, ast.Constant, ast.Attribute, ast.Load, ast.List,
            ast.Tuple, ast.And, ast.Or, ast.Not, ast.USub, *_CMP)


def parse_condition(text: str) -> ast.expr:
    """The checked syntax tree of `text`; a UserError names what is not allowed."""
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError as exc:
        raise UserError(f"condition {text!r} is not valid: {exc.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise UserError(f"condition {text!r} uses {type(node).__name__}, which conditions do not allow")
        negative_number = isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant)
        if isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not) and not negative_number:
            raise UserError(f"condition {text!r}: only 'not' and negative numbers are allowed as unary operators")
    return tree


def condition_fields(tree: ast.expr) -> set[str]:
    """Top-level state fields a condition reads."""
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in ("true", "false", "null")}


def evaluate(tree: ast.expr, state: Any) -> Any:
    if isinstance(tree, ast.Constant):
        return tree.value
    if isinstance(tree, ast.Name):
        constants = {"true": True, "false": False, "null": None}
        if tree.id in constants:
            return constants[tree.id]
        return state.get(tree.id) if isinstance(state, Mapping) else getattr(state, tree.id, None)
    if isinstance(tree, ast.Attribute):
        base = evaluate(tree.value, state)
        return base.get(tree.attr) if isinstance(base, Mapping) else getattr(base, tree.attr, None)
    if isinstance(tree, (ast.List, ast.Tuple)):
        return [evaluate(e, state) for e in tree.elts]
    if isinstance(tree, ast.UnaryOp):
        value = evaluate(tree.operand, state)
        return (not value) if isinstance(tree.op, ast.Not) else -value
    if isinstance(tree, ast.BoolOp):
        values = (evaluate(v, state) for v in tree.values)
        return all(values) if isinstance(tree.op, ast.And) else any(values)
    if isinstance(tree, ast.Compare):
        left = evaluate(tree.left, state)
        for op, right_node in zip(tree.ops, tree.comparators, strict=True):
            right = evaluate(right_node, state)
            try:
                if not _CMP[type(op)](left, right):
                    return False
            except TypeError:
                return False  # e.g. None >= 3: an unset field does not satisfy a comparison
            left = right
        return True
    raise UserError(f"unsupported condition element {type(tree).__name__}")
