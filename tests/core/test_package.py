"""The package's public names: importing it is cheap, every name in `__all__` resolves lazily, and no two
modules define a class of the same name (a reader, or an import, must never have to ask which one is meant)."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import agentflow


def test_all_lists_exactly_the_lazy_names_and_each_resolves():
    assert set(agentflow.__all__) == set(agentflow._LAZY) | {"__version__"}
    for name in agentflow.__all__:
        assert getattr(agentflow, name) is not None


def test_importing_the_package_loads_no_provider_sdk_or_langgraph():
    code = "import sys, agentflow; print(sorted(m for m in ('openai', 'anthropic', 'langgraph', 'docker', 'litellm') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_no_two_modules_define_a_class_of_the_same_name():
    root = Path(agentflow.__file__).parent
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(str(path.relative_to(root.parent)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}
