"""Importing a user's Python file by its path (tool packs, workflow code, node types), once per process."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path


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
