"""Parsing Python text that came from outside (a repository, a model's answer, a synthesized mutation): the one
place such text becomes a syntax tree, or None."""

from __future__ import annotations

import ast


def parsed(source: str, *, compiles: bool = False) -> ast.Module | None:
    """The syntax tree of Python `source`; None when it does not parse (a syntax error, a null byte, nesting
    too deep for the parser). With `compiles`, also None when the tree does not compile: `ast.parse` accepts
    some code the compiler refuses (`return` outside a function, `nonlocal` at module level)."""
    try:
        tree = ast.parse(source)
        if compiles:
            compile(tree, "<source>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return tree
