"""The image: the offline build's contents, and extra Python packages installed offline from a wheelhouse."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentflow.sandbox import open_sandbox

pytestmark = [pytest.mark.docker]

MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"


async def test_base_image_has_the_tools(sandbox_image):
    async with open_sandbox("docker", {"image": sandbox_image}) as sb:
        res = await sb.exec(
            "python3 -m pytest --version && git --version && patch --version | head -1 && rg --version | head -1"
        )
        assert res.ok, res.output
        assert "pytest" in res.output and "git version" in res.output and "ripgrep" in res.output


async def test_the_agent_is_type_checked_for_the_python_of_the_image(sandbox_image):
    """`make test` checks the in-sandbox agent with mypy for `SANDBOX_PYTHON`: the image must run that Python."""
    checked = re.search(r"^SANDBOX_PYTHON := (\S+)$", MAKEFILE.read_text(), flags=re.MULTILINE)
    assert checked is not None, "the Makefile names no SANDBOX_PYTHON"
    async with open_sandbox("docker", {"image": sandbox_image}) as sb:
        res = await sb.exec("python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'")
    assert res.ok, res.output
    assert res.stdout.strip() == checked.group(1)


@pytest.mark.slow
async def test_wheelhouse_dependencies_install_with_no_index(sandbox_image):
    from agentflow.sandbox.image import build_deps_image

    tag = build_deps_image(["iniconfig==2.0.0"], base=sandbox_image)
    async with open_sandbox("docker", {"image": tag}) as sb:  # network is off: the package is baked in
        res = await sb.exec("python3 -c 'import iniconfig; print(iniconfig.__name__)'")
        assert res.stdout == "iniconfig\n", res.output
