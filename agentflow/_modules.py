"""Importing user code: a Python file by its path (tool packs, workflow code, node types), once per process, and
the object a `pkg.mod:attr` or `path/to/file.py:attr` string names (workflow functions, function models, output
schemas)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

from agentflow.errors import UserError, did_you_mean, public_names

MODULE_PREFIX = "agentflow_user_code."


def import_file(path: str | Path, module_name: str) -> types.ModuleType:
    """Import the file `path` as `module_name` (e.g. `agentflow_user_code.gates_1a2b`), once per process.

    The module lives under a private parent package (`module_name`'s first part, created empty on first use),
    so pydantic and pickle can find the classes it defines. An exception of the module's own code propagates,
    and the module is not left half-imported in `sys.modules`.
    """
    file = str(path)
    loaded = sys.modules.get(module_name)
    if loaded is not None and getattr(loaded, "__file__", None) == file:
        return loaded
    namespace = module_name.rpartition(".")[0]
    if namespace and namespace not in sys.modules:
        parent = types.ModuleType(namespace, "Private namespace of user code agentflow loaded by file path.")
        parent.__path__ = []
        sys.modules[namespace] = parent
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py path always has a loader
        raise ImportError(f"cannot load {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def load_file_module(path: str | Path) -> types.ModuleType:
    """Import the Python file `path` (once per process) under a private module name."""
    file = Path(path).expanduser().resolve()
    if not file.is_file():
        raise UserError(f"no such file {path}", hint="check the path before ':'")
    digest = hashlib.sha256(str(file).encode()).hexdigest()[:12]
    try:
        return import_file(file, f"{MODULE_PREFIX}{file.stem}_{digest}")
    except ImportError as exc:
        raise UserError(f"cannot import {file}: {exc}") from None


def split_import_path(path: str, expected: str = "'pkg.module:function'") -> tuple[str, str]:
    """`pkg.mod:attr` (or `pkg.mod.attr`, `path/to/file.py:attr`) as (module, attribute); a path without both is
    a one-line UserError saying what was `expected`."""
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise UserError(f"bad import path {path!r}: expected {expected}")
    return module_name, attr


def import_object(path: str, *, expected: str = "'pkg.module:function'", kind: str = "attribute") -> Any:
    """The object `pkg.mod:attr` (or `pkg.mod.attr`, `path/to/file.py:attr`) names; each way it can fail is a
    one-line UserError (a missing attribute is named as the `kind` of object the caller wanted)."""
    module_name, attr = split_import_path(path, expected)
    try:
        module = load_file_module(module_name) if module_name.endswith(".py") else importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(f"cannot import {module_name} for {path!r}: {exc}") from None
    return attribute_of(module, module_name, attr, path, kind=kind)


def attribute_of(module: types.ModuleType, module_name: str, attr: str, path: str, *, kind: str = "attribute") -> Any:
    """`module`'s attribute `attr` (dotted: an attribute of an attribute); a missing one is a one-line UserError
    naming it as the `kind` of object wanted, with the names it could have meant."""
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UserError(f"{module_name} has no {kind} named {attr!r} (from {path!r})"
                            f"{did_you_mean(part, public_names(obj))}")
        obj = getattr(obj, part)
    return obj
