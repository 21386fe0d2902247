"""The import graph of `agentflow/` has no cycles and no upward imports (docs/architecture.md).

Every import counts, at module level or inside a function, and so does a module loaded by its name: a
string naming an agentflow module (`pkg.mod` or `pkg.mod:attr`) passed to `import_module` / `import_object` /
`resolve_callable`, or held by an ALL-CAPS module constant (a registry of module names). A module may import
its own layer or a lower one; a new subpackage must be given a layer here. The package's lazy table of public
names (`agentflow/__init__.py`) is the one place that names modules of every layer, by design. Imports under `if TYPE_CHECKING:` never run:
they may name a higher layer (the lazy tables' types), but they count for cycles (a cycle of type-only
imports is still a cycle of concepts). No package folder holds more than `MAX_MODULES` modules: a bigger
one is split into subpackages by concern.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[2] / "agentflow"
MAX_MODULES = 15

LAYERS: dict[str, int] = {
    # 1 foundations: the top-level modules
    "agentflow": 1,
    "agentflow.events": 1,
    # 2 parts
    "agentflow.models": 2,
    "agentflow.tools": 2,
    "agentflow.sandbox": 2,
    "agentflow.serving": 2,
    "agentflow.observe": 2,
    "agentflow.mcp": 2,
    "agentflow.executors": 2,
    # 3 composition
    "agentflow.graph": 3,
    "agentflow.agents": 3,
    # 4 the reusable model-driven steps (constraints, verification, algorithm selection)
    "agentflow.reasoning": 4,
    "agentflow.workflows": 4,  # the shipped workflows' own node functions
    # 5 task kinds: the SWE-bench harness, code generation (HumanEval), instruction following
    "agentflow.swe": 5,
    "agentflow.codegen": 5,
    "agentflow.instruct": 5,
    "agentflow.synth": 5,  # task synthesis: builds on swe/ (same layer), never on repair/
    # 6 the repair solver (node types over the harness)
    "agentflow.repair": 6,
    # 7 running many tasks (executors), then 8 entry points
    "agentflow.mcp_server": 7,
    "agentflow.cli": 8,
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) >= 2 and ".".join(parts[:2]) in LAYERS:
        return LAYERS[".".join(parts[:2])]
    if len(parts) == 2 and (ROOT / f"{parts[1]}.py").exists():
        return 1  # a top-level module
    if module == "agentflow":
        return 1
    return None


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
            ):
                skip.update(id(x) for stmt in node.body for x in ast.walk(stmt))
    return skip


_MODULE_STRING = re.compile(r"^(agentflow(?:\.\w+)+)(?::[\w.]+)?$")
_LOADERS = {"import_module", "import_object", "resolve_callable"}


def _loaded_by_name(tree: ast.AST) -> list[str]:
    """Modules a file loads by a string: a loader call's first argument, or an ALL-CAPS constant's strings."""
    found: list[str] = []
    for node in ast.walk(tree):
        values: list[ast.AST] = []
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in _LOADERS and node.args:
                values = [node.args[0]]
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id.isupper() for t in node.targets
        ):
            values = list(ast.walk(node.value))
        for value in values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                match = _MODULE_STRING.match(value.value)
                if match:
                    found.append(match.group(1))
    return found


def import_graph(*, type_only: bool = False) -> nx.DiGraph:
    """Module -> the modules it imports; `type_only` adds the imports under `if TYPE_CHECKING:`."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = set() if type_only else _type_checking_nodes(tree)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            _add_edges(graph, modules, name, targets)
        if name != "agentflow":  # the lazy table of public names (see the module docstring)
            _add_edges(graph, modules, name, _loaded_by_name(tree))
    return graph


def _add_edges(graph: nx.DiGraph, modules: dict[str, Path], name: str, targets: list[str]) -> None:
    for target in targets:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        # importing a package's __init__ from inside that package is not an edge worth drawing
        if target and target != name and not name.startswith(target + ".") and target != "agentflow":
            graph.add_edge(name, target)


def test_every_subpackage_has_a_layer() -> None:
    missing = sorted({m for m in import_graph() if _layer(m) is None})
    assert not missing, f"give these a layer in tests/core/test_layers.py (and docs/architecture.md): {missing}"


def test_no_import_cycles() -> None:
    cycles = [c for c in nx.simple_cycles(import_graph(type_only=True)) if len(c) > 1]
    shown = [" -> ".join([*c, c[0]]) for c in sorted(cycles, key=len)[:10]]
    assert not cycles, "import cycles:\n" + "\n".join(shown)


def test_no_module_imports_a_higher_layer() -> None:
    upward = []
    for a, b in import_graph().edges:
        la, lb = _layer(a), _layer(b)
        if la is not None and lb is not None and lb > la:
            upward.append(f"{a} (layer {la}) imports {b} (layer {lb})")
    assert not upward, "upward imports:\n" + "\n".join(sorted(upward))


def test_no_package_folder_is_flat_and_big() -> None:
    sizes = {folder: len(list(folder.glob("*.py"))) for folder in [ROOT, *ROOT.rglob("*")] if folder.is_dir()}
    big = sorted(f"{folder.relative_to(ROOT.parent)}: {n} modules" for folder, n in sizes.items() if n > MAX_MODULES)
    assert not big, f"split these by concern into subpackages (at most {MAX_MODULES} modules each):\n" + "\n".join(big)
