"""The image: the offline build's contents, and extra Python packages installed offline from a wheelhouse."""

from __future__ import annotations

import pytest

from agentflow.sandbox import open_sandbox

pytestmark = [pytest.mark.docker]


async def test_base_image_has_the_tools(sandbox_image):
    async with open_sandbox("docker", {"image": sandbox_image}) as sb:
        res = await sb.exec(
            "python3 -m pytest --version && git --version && patch --version | head -1 && rg --version | head -1"
        )
        assert res.ok, res.output
        assert "pytest" in res.output and "git version" in res.output and "ripgrep" in res.output


@pytest.mark.slow
async def test_wheelhouse_dependencies_install_with_no_index(sandbox_image):
    from agentflow.sandbox.image import build_deps_image

    tag = build_deps_image(["iniconfig==2.0.0"], base=sandbox_image)
    async with open_sandbox("docker", {"image": tag}) as sb:  # network is off: the package is baked in
        res = await sb.exec("python3 -c 'import iniconfig; print(iniconfig.__name__)'")
        assert res.stdout == "iniconfig\n", res.output
