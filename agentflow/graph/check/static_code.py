"""Checking the Python a workflow names (`fn:`, route `on:`, `tools:`, `node_types:`) without running it.

`CodeCheck` finds the module without importing it or its packages (a file must lie inside the workflow's
folder), parses its text (`ast`) and checks that it binds the named function with a signature the node can
be called with; what only an import can tell is noted as not checked. `import_code=True` imports the code
instead (the exact check `agentflow run` makes). A module already imported is checked as imported.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, NoReturn

from pydantic import BaseModel

from agentflow._modules import attribute_of, split_import_path
from agentflow.errors import UserError, did_you_mean
from agentflow.graph.compile.nodetypes import NodeType, NodeTypeRegistry, default_registry, workflow_registry
from agentflow.graph.define.loader import resolve_callable
from agentflow.graph.define.spec import WorkflowSpec
from agentflow.graph.define.user_code import folder_module, is_file_path
from agentflow.graph.run.context import NodeContext

UNCHECKED = "not checked without --import-code"
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class ModuleText:
    """What a module's source binds at module level, read with `ast` (none of it runs)."""

    names: dict[str, ast.stmt]  # module-level name -> the statement that binds it
    open_ended: bool  # a star import, a module `__getattr__` or `globals()`: it may bind names not shown
    imported: frozenset[str]  # names from `from ... import` outside the standard library
    tools: int  # functions decorated with `@tool`, and `tool(...)` calls
    node_types: tuple[tuple[str, str], ...]  # (name, description) of each `NodeType(...)` with a literal name
    types_opaque: bool  # a `NodeType(...)` whose name is not a literal


@dataclass(frozen=True)
class UncheckedType(NodeType):
    """A node type of a workflow's `node_types:` module read from its text (its settings model is unknown)."""

    module: str = ""  # the `node_types:` entry that defines it


@dataclass
class StaticRegistry(NodeTypeRegistry):
    """The shipped and installed node types plus a workflow's own, read from text (`UncheckedType`)."""

    opaque: list[str] = field(default_factory=list)  # `node_types:` modules whose types only an import shows


@dataclass(frozen=True)
class Found:
    """Where a module is, found without importing it."""

    file: Path | None  # its Python source (None: built in, compiled, or a namespace package)
    module: types.ModuleType | None = None  # the module, when this process has imported it already


def find_module(name: str, first: Path | None = None) -> Found | None:
    """Module `name` (looked for in `first` before sys.path), without importing it or its packages."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        return Found(None, loaded)
    parts = name.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    local = folder_module(first, name) if first is not None else None
    if local is not None:
        return Found(local)
    try:
        spec = importlib.util.find_spec(parts[0])  # a top-level name is found, not imported
        for i in range(1, len(parts)):
            if spec is None or spec.submodule_search_locations is None:
                return None
            # PathFinder looks in the package's folders without running the package's __init__.py
            locations = list(spec.submodule_search_locations)
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: i + 1]), locations)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    origin = spec.origin if spec.has_location else None
    return Found(Path(origin) if origin and origin.endswith(".py") else None)


def read_module(file: Path) -> ModuleText:
    """What `file` binds, from its text (cached per file version); a UserError when it does not parse."""
    try:
        stat = file.stat()
    except OSError as exc:
        raise UserError(f"cannot read {file}: {exc.strerror}") from None
    return _read_module(str(file), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _read_module(file: str, _mtime: int, _size: int) -> ModuleText:
    try:
        tree = ast.parse(Path(file).read_bytes(), filename=file)
    except SyntaxError as exc:
        raise UserError(f"cannot parse {file}: {exc.msg} (line {exc.lineno})", hint="fix its Python") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise UserError(f"cannot parse {file}: {type(exc).__name__}") from None
    names: dict[str, ast.stmt] = {}
    _bind(tree.body, names)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    decorators = [d for n in ast.walk(tree) if isinstance(n, _FUNCTIONS) for d in n.decorator_list]
    node_types = [_node_type(c) for c in calls if _names(c.func, "NodeType")]
    return ModuleText(
        names=names,
        open_ended="*" in names
        or isinstance(names.get("__getattr__"), _FUNCTIONS)
        or any(_names(c.func, "globals") for c in calls),
        imported=frozenset(k for k, v in names.items() if isinstance(v, ast.ImportFrom) and not _stdlib(v)),
        tools=sum(_names(d, "tool") for d in decorators) + sum(_names(c.func, "tool") for c in calls),
        node_types=tuple(t for t in node_types if t is not None),
        types_opaque=None in node_types,
    )


def _bind(body: list[ast.stmt], names: dict[str, ast.stmt]) -> None:
    """Record the names `body` binds at module level (in if/try/with/for blocks too: they run on import)."""
    for stmt in body:
        if isinstance(stmt, (*_FUNCTIONS, ast.ClassDef)):
            names[stmt.name] = stmt
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                names[alias.asname or alias.name.partition(".")[0]] = stmt
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for node in (n for t in targets for n in ast.walk(t)):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names[node.id] = stmt
        else:
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.stmt):
                    _bind([child], names)
                elif isinstance(child, (ast.ExceptHandler, ast.match_case)):
                    _bind(child.body, names)


def _stdlib(stmt: ast.ImportFrom) -> bool:
    return not stmt.level and (stmt.module or "").partition(".")[0] in {*sys.stdlib_module_names, "__future__"}


def _names(node: ast.expr, name: str) -> bool:
    """`node` is `name`, `x.name`, or a call of either (`@tool(...)`)."""
    if isinstance(node, ast.Call):
        node = node.func
    return (isinstance(node, ast.Name) and node.id == name) or (isinstance(node, ast.Attribute) and node.attr == name)


def _node_type(call: ast.Call) -> tuple[str, str] | None:
    """(name, description) of a `NodeType(...)` call; None when its name is not a literal."""
    args = {k.arg: k.value for k in call.keywords if k.arg}
    name = _literal(args.get("name", call.args[0] if call.args else None), str)
    if name is None:
        return None
    return name, _literal(args.get("description"), str) or ""


def _literal(node: ast.expr | None, kind: type) -> Any:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, kind) else None


def signature_problem(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx_ok: bool) -> str | None:
    """Why `fn` cannot be called as a node (`(state)` or `(state, ctx)`) or a route (`(state)`); None when it
    can or is decorated (a decorator may change the signature)."""
    if fn.decorator_list:
        return None
    a = fn.args
    positional = len(a.posonlyargs) + len(a.args)
    passed = 2 if ctx_ok and (positional >= 2 or a.vararg) else 1  # as compile._wants_ctx decides
    required_kw = [k.arg for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None]
    if (positional or a.vararg) and positional - len(a.defaults) <= passed and not required_kw:
        return None
    want = "(state) or (state, ctx)" if ctx_ok else "(state)"
    return f"{fn.name}() (line {fn.lineno}) cannot be called as {want}; fix its parameters"


@dataclass
class CodeCheck:
    """Checks the user code a workflow names: reads it (default), or imports it (`import_code`)."""

    root: Path  # the workflow's folder: a code file outside it is not read
    import_code: bool = False  # import the code (runs it): the exact check, for workflows you trust
    notes: list[str] = field(default_factory=list)  # one line per thing only an import could check

    def callable_problem(self, ref: Any, what: str, where: str = "", *, ctx_ok: bool = True) -> str | None:
        """Why `ref` (`pkg.mod:func`, `path/file.py:func`) is not a function a node or route can call, or None."""
        if not isinstance(ref, str):
            return None  # a Python object (builder): compile checks it
        try:
            if self.import_code:
                resolve_callable(ref, what)
                return None
            return self._read_callable(ref, f"{where}{what}", ctx_ok)
        except UserError as exc:
            return str(exc)

    def _read_callable(self, ref: str, what: str, ctx_ok: bool) -> str | None:
        module, attr = split_import_path(ref)
        file = self._locate(module, Path(module).expanduser(), what, f"no such file {module}",
                            UserError(f"cannot import {module} for {ref!r}: No module named {module!r}"))
        if isinstance(file, types.ModuleType):
            return _attribute_problem(file, module, attr, ref)
        if file is None:
            return None
        text = read_module(file)
        head, _, rest = attr.partition(".")
        stmt = text.names.get(head)
        if stmt is None and text.open_ended:
            self.notes.append(f"{what}: {ref}: {module} may define {head!r} when imported; {UNCHECKED}")
        elif stmt is None and not is_file_path(module) and find_module(f"{module}.{head}") is not None:
            return f"{ref!r} is not callable"  # a submodule
        elif stmt is None:
            return f"{module!r} has no attribute {attr!r} (from {ref!r}){did_you_mean(head, text.names)}"
        elif rest:
            self.notes.append(f"{what}: {ref}: {head!r} is defined, {rest!r} of it is {UNCHECKED}")
        elif isinstance(stmt, _FUNCTIONS):
            return signature_problem(stmt, ctx_ok)
        return None

    def _locate(self, name: str, path: Path, what: str, missing: str, unknown: UserError,
                base: Path | None = None) -> Path | types.ModuleType | None:
        """Module or file `name` (a .py name: at `path`): its source file, or the module itself when this process
        imported it already; None (noted) when it has no source here to read. `missing`, `unknown`: the
        errors when the file or the module is not there."""
        if is_file_path(name):
            return self._file(path, what, missing)
        found = find_module(name, base)
        if found is None:
            raise unknown
        if found.module is None and found.file is None:
            self.notes.append(f"{what}: {name} has no Python source to read; {UNCHECKED}")
        return found.module or found.file

    def _file(self, path: Path, what: str, missing: str) -> Path | None:
        """`path` resolved; None (and a note) when it is outside the workflow's folder; a UserError when absent."""
        file = path.resolve()
        if not file.is_file():
            raise UserError(missing, hint="check the path")
        if not file.is_relative_to(self.root.resolve()):
            self.notes.append(f"{what}: {path} is outside the workflow's folder {self.root}, so it is not read; "
                              f"{UNCHECKED}")
            return None
        return file

    def pack_problem(self, pack: str, where: str = "") -> str | None:
        """Why tool pack `pack` would not load, or None. A shipped pack is loaded (agentflow's own code)."""
        from agentflow.tools.packs import available_packs, load_pack

        name = pack.strip()
        try:
            if self.import_code or (not name.endswith(".py") and name in available_packs()):
                load_pack(name)
                return None
            return self._read_pack(name, f"{where}tool pack {name!r}")
        except UserError as exc:
            return str(exc)

    def _read_pack(self, name: str, what: str) -> str | None:
        from agentflow.tools.packs import collect_tools, unknown_pack

        none = f"tool pack {name!r} defines no @tool functions (decorate functions with @tool)"
        path = Path(name).expanduser()
        file = self._locate(name, path, what, f"tool pack file {path} not found", unknown_pack(name))
        if isinstance(file, types.ModuleType):
            return None if collect_tools(file) else none
        if file is None:
            return None
        text = read_module(file)
        if text.tools:
            return None
        if text.open_ended or text.imported - {"tool", "Tool"}:
            self.notes.append(f"{what}: no @tool function in its text (it may import them); {UNCHECKED}")
            return None
        return none

    def registry(self, spec: WorkflowSpec) -> NodeTypeRegistry:
        """The node types `spec` can use: shipped, installed, and its `node_types:` modules' (read or imported)."""
        if self.import_code:
            return workflow_registry(spec)
        out = StaticRegistry(dict(default_registry().types))
        base = Path(spec.source_path).parent if spec.source_path else None
        for name in spec.node_types:
            self._read_types(name, base, out)
        return out

    def _read_types(self, name: str, base: Path | None, out: StaticRegistry) -> None:
        what = f"node_types: {name}"
        path = Path(base or ".") / name
        file = self._locate(name, path, what, f"node_types: {path} not found",
                            UserError(f"node_types: cannot import {name!r}: No module named {name!r}"), base)
        if isinstance(file, types.ModuleType):
            out.add_module(file, replace=True)  # imported already: its real types
            return
        text = read_module(file) if file is not None else None
        if text is not None and "NODE_TYPES" not in text.names and not text.open_ended:
            raise UserError(f"node_types: {name} has no NODE_TYPES list", hint="define NODE_TYPES = [NodeType(...)]")
        for type_name, description in text.node_types if text is not None else ():
            out.register(UncheckedType(name=type_name, run=_not_imported, module=name,
                                       description=f"{description} (from {name})".lstrip()), replace=True)
        if text is None or text.types_opaque or not text.node_types:
            out.opaque.append(name)
            if text is not None:  # (a module not read is noted above)
                self.notes.append(f"{what}: the node types it adds are made in code; {UNCHECKED}")


def _attribute_problem(module: types.ModuleType, module_name: str, attr: str, ref: str) -> str | None:
    """The check `_modules.import_object` makes, on a module this process has imported already."""
    head = attr.partition(".")[0]
    if not hasattr(module, head) and find_module(f"{module_name}.{head}") is not None:
        return f"{ref!r} is not callable"  # a submodule, not imported yet
    try:
        obj = attribute_of(module, module_name, attr, ref)
    except UserError as exc:
        return str(exc)
    return None if callable(obj) else f"{ref!r} is not callable"


async def _not_imported(state: Mapping[str, object], ctx: NodeContext[object],
                        settings: BaseModel | None) -> NoReturn:
    """The `run` of an `UncheckedType`: its module was read, not imported, so there is nothing to call."""
    raise UserError("a node type read without importing its module cannot run", hint="run with agentflow run")


def workflow_folder(spec: WorkflowSpec) -> Path:
    """The folder of the workflow's file (the current folder for a workflow made in Python)."""
    return Path(spec.source_path).parent if spec.source_path else Path(".")


__all__ = ["UNCHECKED", "CodeCheck", "Found", "ModuleText", "StaticRegistry", "UncheckedType", "find_module",
           "read_module", "signature_problem", "workflow_folder"]
