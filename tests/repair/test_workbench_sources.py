"""The repair's view of a repository in its sandbox: every Python file, whatever sits in its top folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentflow.repair.config import load_repair_config
from agentflow.repair.verify.workbench import Workbench
from agentflow.sandbox import open_sandbox
from agentflow.swe.workspace import repo_task

pytestmark = pytest.mark.docker


async def test_sources_include_packages_below_a_top_level_module(docker_image: str, tmp_path: Path) -> None:
    # like an sdist: setup.py and a test module in the top folder, the package below it
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='pkg')\n")
    (tmp_path / "test_pkg.py").write_text("from pkg.core import f\n\ndef test_f():\n    assert f() == 1\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "core.py").write_text("def f():\n    return 2\n")
    cfg = load_repair_config([f"sandbox.image={docker_image}"])
    async with open_sandbox("docker", cfg.sandbox) as sandbox:
        bench = Workbench(sandbox, repo_task(tmp_path, "f() returns 2"), cfg, "python3")
        await bench.setup()
        sources = await bench.python_sources()
    assert sorted(sources) == ["pkg/__init__.py", "pkg/core.py", "setup.py", "test_pkg.py"]
    assert sources["pkg/core.py"] == "def f():\n    return 2\n"
