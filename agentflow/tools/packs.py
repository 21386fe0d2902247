"""Tool packs: a module of `@tool` functions, loaded by name.

A built-in pack is `tools/<name>.py` under `resources.data_dir("tools")`, loaded by file path as the private
module `agentflow_packs.<name>` (the folder is data, not an importable package called `tools`). Anything
else is a user module imported by its dotted name (`my_pkg.tools`) or a path to a `.py` file.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import types
from pathlib import Path

from agentflow._modules import import_file
from agentflow.errors import UserError
from agentflow.resources import data_dir
from agentflow.tools.decorator import PACK_MODULE_PREFIX, Tool


def available_packs() -> list[str]:
    """Names of the built-in packs."""
    folder = data_dir("tools")
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_") and p.stem.isidentifier())


def load_pack(name: str) -> list[Tool]:
    """The `Tool`s defined in pack `name`, in definition order.

    `name` is a built-in pack (`calc`), a dotted module (`my_pkg.tools`) or a `.py` file path.
    """
    name = name.strip()
    if name.endswith(".py"):
        path = Path(name).expanduser()
        if not path.is_file():
            raise UserError(f"tool pack file {path} not found", hint="check the path")
        digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
        module = _load_file(path, f"{PACK_MODULE_PREFIX}file_{path.stem}_{digest}", label=str(path))
    elif name in available_packs():
        module = _load_file(data_dir("tools") / f"{name}.py", PACK_MODULE_PREFIX + name, label=name)
    else:
        module = _import_user_module(name)
    tools = collect_tools(module)
    if not tools:
        raise UserError(
            f"tool pack {name!r} defines no @tool functions", hint="decorate functions with @tool"
        )
    return tools


def collect_tools(module: types.ModuleType) -> list[Tool]:
    """Every `Tool` object bound at the top level of `module` (each once)."""
    return list({id(value): value for value in vars(module).values() if isinstance(value, Tool)}.values())


def unknown_pack(name: str) -> UserError:
    """The error for a pack name that is neither a shipped pack nor an importable module."""
    packs = ", ".join(available_packs()) or "none"
    return UserError(
        f"unknown tool pack {name!r}; built-in packs: {packs}",
        hint="or give an importable module like my_pkg.tools, or a path to a .py file",
    )


def _import_user_module(name: str) -> types.ModuleType:
    if not all(part.isidentifier() for part in name.split(".")):
        raise unknown_pack(name)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise unknown_pack(name) from None
        raise UserError(f"tool pack {name!r} failed to import: {exc}", hint="install what it needs") from None
    except ImportError as exc:
        raise UserError(f"tool pack {name!r} failed to import: {exc}") from None


def _load_file(path: Path, module_name: str, *, label: str) -> types.ModuleType:
    """Load a pack file once per process under a private module name (so pydantic and pickling can find it)."""
    try:
        return import_file(path, module_name)
    except ModuleNotFoundError as exc:
        raise UserError(f"tool pack {label!r} needs the {exc.name!r} package, which is not installed") from None
