"""Keep a model patch from grading itself: test-infrastructure files go back to the base commit.

A patch that adds a root `conftest.py` forcing every outcome to "passed", a plugin module plus
`addopts = -p plugin` in `pytest.ini`, a `sitecustomize.py` or a `.pth` file would be graded resolved if the
harness ran the tests over it. So before the tests run, every such file that the model patch adds or
changes is restored from the base commit (or removed, when the base has none), and the report names them.

Which files: decided on the host, from the host's own parse of the patch (never from what the sandbox says
changed). The files themselves are restored with git inside the sandbox, where no model-written code has
run yet in `eval` (the patch went in through `git apply`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from pathlib import PurePosixPath

from agentflow.sandbox.base import Sandbox, sh_command
from agentflow.swe.patch import SCRATCH_DIR, parse_patch

INFRA_NAMES = frozenset(
    {"conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", "sitecustomize.py", "usercustomize.py"}
)
"""File names that configure or hook into pytest or the interpreter wherever they are in the tree."""
CONFIG_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
"""Files whose pytest section may name plugins (`-p NAME` in `addopts`)."""
_PLUGIN_FLAG = re.compile(r"(?:^|\s)-p\s*([A-Za-z_][\w.]*)")


def plugin_modules(texts: Iterable[str]) -> set[str]:
    """Module names given to pytest with `-p NAME` in config texts or a test command (`no:x` excluded)."""
    found: set[str] = set()
    for text in texts:
        found.update(_PLUGIN_FLAG.findall(text))
    return found


def _module_of(path: str) -> str | None:
    p = PurePosixPath(path)
    if p.suffix != ".py":
        return None
    parts = list(p.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) if parts else None


def infra_paths(patch: str, plugins: Iterable[str] = ()) -> list[str]:
    """Paths the patch adds, changes, deletes or renames that belong to the test infrastructure."""
    plugins = set(plugins)
    out: list[str] = []
    for fp in parse_patch(patch).files:
        for path in {fp.old_path, fp.new_path} - {None}:
            assert path is not None
            name = PurePosixPath(path).name
            module = _module_of(path)
            hit = (
                name in INFRA_NAMES
                or name.endswith(".pth")
                or path.split("/", 1)[0] == SCRATCH_DIR
                # `-p pkg.plugin` may live at the root or under src/
                or (module is not None and any(module == m or module.endswith("." + m) for m in plugins))
            )
            if hit and path not in out:
                out.append(path)
    return out


async def base_plugins(sandbox: Sandbox, base: str, test_cmd: str | None) -> set[str]:
    """Plugins the base commit's pytest configuration (and the task's test command) load with `-p`."""
    texts = [test_cmd or ""]
    for name in CONFIG_FILES:
        res = await sandbox.exec(f"git show {shlex.quote(f'{base}:{name}')}")
        if res.ok:
            texts.append(res.stdout)
    return plugin_modules(texts)


async def restore_test_infra(sandbox: Sandbox, patch: str, *, base: str = "HEAD", test_cmd: str | None = None) -> list[str]:
    """Put every test-infrastructure file the patch touched back as it is at `base`; return those paths."""
    if not patch.strip():
        return []
    paths = infra_paths(patch, await base_plugins(sandbox, base, test_cmd))
    for path in paths:
        q, ref = shlex.quote(path), shlex.quote(f"{base}:{path}")
        script = f"if git cat-file -e {ref} 2>/dev/null; then git checkout -q {shlex.quote(base)} -- {q}; else rm -rf -- {q}; fi"
        res = await sandbox.exec(sh_command(script))
        if not res.ok:
            from agentflow.errors import SandboxError

            raise SandboxError(f"could not restore {path} from the base commit: {res.output.strip()[-200:]}")
    return paths
