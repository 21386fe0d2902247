"""Lazy public names for packages whose implementations import heavy libraries (layer 1, imports nothing).

A package keeps a table `name -> module` and sets `__getattr__ = lazy_getattr(__name__, table, globals())`:
the module is imported on first access and the value cached in the package's namespace.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, table: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module-level `__getattr__` resolving `table`'s names on first use (PEP 562)."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
