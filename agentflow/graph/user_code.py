"""User code next to a workflow file: `fn: gates:review_gate`, `tools: [mytools]` and `path/to/file.py:func`
work without PYTHONPATH.

A name whose module is a file (or package) in the workflow's folder is rewritten, when the workflow is loaded,
to that file's path (`/abs/dir/gates.py:review_gate`); such paths are imported by file location under a
private module name, once per process. Names that are not next to the workflow stay import paths.
"""

from __future__ import annotations

import hashlib
import importlib.util
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentflow._modules import import_file
from agentflow.errors import UserError

if TYPE_CHECKING:
    from agentflow.graph.spec import WorkflowSpec

MODULE_PREFIX = "agentflow_user_code."


def is_file_path(module: str) -> bool:
    return module.endswith(".py")


def load_file_module(path: str | Path) -> types.ModuleType:
    """Import the Python file `path` (once per process) under a private module name."""
    file = Path(path).expanduser().resolve()
    if not file.is_file():
        raise UserError(f"cannot import {path}: no such file", hint="check the path before ':'")
    digest = hashlib.sha256(str(file).encode()).hexdigest()[:12]
    name = f"{MODULE_PREFIX}{file.stem}_{digest}"
    try:
        return import_file(file, name)
    except ImportError as exc:
        raise UserError(f"cannot import {file}: {exc}") from None


def _local_file(base: Path, module: str) -> Path | None:
    """The file in `base` that `module` (dotted, or a relative .py path) names, if there is one."""
    if is_file_path(module):
        candidate = base / module
        return candidate if candidate.is_file() else None
    parts = module.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    try:
        if importlib.util.find_spec(parts[0]) is not None:
            return None  # importable as it is: the import path wins
    except (ImportError, ValueError):
        pass
    return folder_module(base, module)


def folder_module(base: Path, module: str) -> Path | None:
    """The file in `base` that holds the dotted module `module` (`a.b` -> a/b.py or a/b/__init__.py)."""
    parts = module.split(".")
    for candidate in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
        if candidate.is_file():
            return candidate
    return None


def localize_path(value: Any, base: Path) -> Any:
    """`mod:attr` -> `/abs/base/mod.py:attr` when mod is a file in `base`; anything else unchanged."""
    if not isinstance(value, str) or ":" not in value:
        return value
    module, _, attr = value.partition(":")
    found = _local_file(base, module)
    return f"{found.resolve()}:{attr}" if found is not None else value


def localize_pack(pack: str, base: Path) -> str:
    """A tool pack name that is a file (or relative .py path) in `base` -> its absolute path."""
    found = _local_file(base, pack)
    if found is None or found.name == "__init__.py":
        return pack
    return str(found.resolve())


def localize(spec: WorkflowSpec, base: Path) -> None:
    """Rewrite the workflow's fn:, route on:, tools: and agent tool packs that live in `base` to file paths."""
    spec.tools = [localize_pack(p, base) for p in spec.tools]
    for node in spec.nodes.values():
        node.fn = localize_path(node.fn, base)
        config = node.args.get("config") if node.agent is not None else None
        if isinstance(config, dict) and isinstance(config.get("tools"), list):
            config["tools"] = [localize_pack(p, base) if isinstance(p, str) else p for p in config["tools"]]
    for route in spec.routes:
        route.on = localize_path(route.on, base)


__all__ = ["folder_module", "is_file_path", "load_file_module", "localize", "localize_pack", "localize_path"]
