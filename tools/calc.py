"""Pack `calc`: exact arithmetic for models, which are poor at it.

Expressions are parsed with `ast` and evaluated by walking the tree: only numbers, arithmetic operators,
comparisons and a fixed set of `math` functions are allowed, so nothing in the input can run code.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from agentflow.errors import ToolError
from agentflow.tools import tool

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs, "round": round, "min": min, "max": max, "int": int, "float": float,
    "sqrt": math.sqrt, "exp": math.exp, "log": math.log, "log2": math.log2, "log10": math.log10,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "asin": math.asin, "acos": math.acos, "atan": math.atan,
    "floor": math.floor, "ceil": math.ceil, "factorial": math.factorial, "gcd": math.gcd, "comb": math.comb,
    "hypot": math.hypot, "degrees": math.degrees, "radians": math.radians,
}  # fmt: skip
_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf}
_MAX_EXPONENT = 10_000
_MAX_FACTORIAL = 5_000
_MAX_LENGTH = 1_000


def evaluate(expression: str) -> int | float | bool:
    """Evaluate an arithmetic expression safely; raises ToolError with a model-readable reason."""
    if len(expression) > _MAX_LENGTH:
        raise ToolError(f"expression is longer than {_MAX_LENGTH} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"cannot parse {expression!r}: {exc.msg}") from None
    try:
        return _eval(tree.body)
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except OverflowError:
        raise ToolError("the result is too large") from None
    except (ValueError, TypeError) as exc:
        raise ToolError(f"math error: {exc}") from None


def _eval(node: ast.AST) -> Any:
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise ToolError(f"unknown name {node.id!r}; constants: {', '.join(_CONSTANTS)}")
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and isinstance(right, (int, float)) and abs(right) > _MAX_EXPONENT:
            raise ToolError(f"exponent {right} is larger than {_MAX_EXPONENT}")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.Compare):
        left = _eval(node.left)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            if type(op) not in _COMPARE:
                raise ToolError(f"unsupported comparison {type(op).__name__}")
            right = _eval(comparator)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        fn = _FUNCTIONS.get(node.func.id)
        if fn is None:
            raise ToolError(f"unknown function {node.func.id!r}; functions: {', '.join(sorted(_FUNCTIONS))}")
        args = [_eval(a) for a in node.args]
        if fn is math.factorial and args and isinstance(args[0], int) and args[0] > _MAX_FACTORIAL:
            raise ToolError(f"factorial argument is larger than {_MAX_FACTORIAL}")
        return fn(*args)
    raise ToolError(f"unsupported syntax: {ast.unparse(node)!r} (only numbers, operators and math functions)")


@tool(timeout=5.0)
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression exactly and return the result.

    Supports + - * / // % ** and parentheses, comparisons, the constants pi, e, tau, and functions such
    as sqrt, log, sin, cos, floor, ceil, round, min, max, factorial, gcd, comb.

    Args:
        expression: The expression, e.g. "(3 + 4) * 2 ** 10" or "sqrt(2) * pi".
    """
    value = evaluate(expression)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return f"{value:.1f}"
    return repr(value) if isinstance(value, float) else str(value)
