"""The package's public names: importing it is cheap, and every name in `__all__` resolves lazily."""

from __future__ import annotations

import subprocess
import sys

import agentflow


def test_all_lists_exactly_the_lazy_names_and_each_resolves():
    assert set(agentflow.__all__) == set(agentflow._LAZY) | {"__version__"}
    for name in agentflow.__all__:
        assert getattr(agentflow, name) is not None


def test_importing_the_package_loads_no_provider_sdk_or_langgraph():
    code = "import sys, agentflow; print(sorted(m for m in ('openai', 'anthropic', 'langgraph', 'docker', 'litellm') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
