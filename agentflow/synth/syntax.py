"""Parsing Python: the one place synth and the repair solver (a layer above, so it may import this) turn source
text into a syntax tree."""

from __future__ import annotations

import ast


def parsed(source: str, *, compiles: bool = False) -> ast.Module | None:
    """The syntax tree of Python `source`; None when it does not parse (a syntax error, a null byte). With
    `compiles`, also None when the tree does not compile: `ast.parse` accepts some code the compiler refuses
    (`return` outside a function, `nonlocal` at module level)."""
    try:
        tree = ast.parse(source)
        if compiles:
            compile(tree, "<synth>", "exec")
    except (SyntaxError, ValueError):
        return None
    return tree
