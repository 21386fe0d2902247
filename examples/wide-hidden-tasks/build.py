"""The wide hidden-tests set: three of the wide set's packages, tasks made by `agentflow tasks synth --hide-tests`.

The repository carries only `tasks.jsonl` and `gold.jsonl`; the task folders (`repos/`, git-ignored) are made
from the wide set's pinned sdists (examples/wide-tasks/build.py: `PACKAGES`, the download and its check):

    PYTHONPATH=. .venv/bin/python examples/wide-hidden-tasks/build.py            # fetch, verify, make repos/
    PYTHONPATH=. .venv/bin/python examples/wide-hidden-tasks/build.py --synth    # re-run synth (Docker)

Making `repos/`: every task's folder is the clean tree with its `test_patch` reversed (the hidden tests cut)
and then its gold patch reversed; the folder's deterministic snapshot must be the task's `base_commit`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
SEED = 52
"""The wide set's seed: the same candidates in the same order, so most tasks here hide the tests of a wide task's bug."""
PICKED = ("idna", "pathspec", "jmespath")
LIMIT = 2
SUFFIX = "-hidden"
"""Added to the package's name in instance ids and folders, so the ids differ from the wide set's."""


def _wide() -> ModuleType:
    """examples/wide-tasks/build.py (its packages and sdist download), loaded by path: examples is no package."""
    spec = importlib.util.spec_from_file_location("wide_tasks_build", HERE.parent / "wide-tasks" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _lines(path: Path) -> list[str]:
    return [x for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def _reverse(repo: Path, patch: str) -> None:
    # outside any repository (this folder is inside agentflow's: git would patch relative to its root)
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(repo.parent)}
    subprocess.run(["git", "apply", "-R"], cwd=repo, check=True, env=env, input=patch.encode())


def make_repos(cache: Path) -> None:
    """Every task's folder: the clean tree less its hidden tests and gold fix, checked against `base_commit`."""
    from agentflow.swe.workspace import snapshot_commit

    wide = _wide()
    tasks = [json.loads(x) for x in _lines(HERE / "tasks.jsonl")]
    golds = {g["instance_id"]: g["model_patch"] for g in map(json.loads, _lines(HERE / "gold.jsonl"))}
    with tempfile.TemporaryDirectory() as tmp:
        for task in tasks:
            pkg = wide.BY_NAME[task["instance_id"].split("__", 1)[0].removesuffix(SUFFIX)]
            clean = Path(tmp) / pkg.name
            if not clean.exists():
                wide.unpack_clean(pkg, cache, clean)
            repo = HERE / task["repo"]
            shutil.rmtree(repo, ignore_errors=True)
            shutil.copytree(clean, repo)
            _reverse(repo, task["test_patch"])
            _reverse(repo, golds[task["instance_id"]])
            head = snapshot_commit(repo, Path(tmp) / f"check-{task['instance_id']}")
            if head != task["base_commit"]:
                raise SystemExit(f"{task['instance_id']}: repos/ snapshot {head[:12]} is not base_commit {task['base_commit'][:12]}")
            print(f"{task['repo']}: at {head[:12]}", flush=True)


def synth(cache: Path) -> int:
    """Run `agentflow tasks synth --hide-tests` on each picked package's clean tree; write both files and repos/."""
    wide = _wide()
    tasks: list[str] = []
    golds: list[str] = []
    for name in PICKED:
        pkg = wide.BY_NAME[name]
        with tempfile.TemporaryDirectory() as tmp:
            clean, out = Path(tmp) / pkg.name, Path(tmp) / "out"
            wide.unpack_clean(pkg, cache, clean)
            cmd = [sys.executable, "-m", "agentflow.cli.main", "tasks", "synth", str(clean), "-o", str(out), "--hide-tests",
                   "--seed", str(SEED), "--limit", str(LIMIT), "--max-candidates", str(pkg.candidates),
                   "--max-failing", str(pkg.max_failing), "--name", pkg.name + SUFFIX, "--version", pkg.version]
            print("$", " ".join(cmd[3:]), flush=True)
            if subprocess.run(cmd, check=False).returncode != 0:
                print(f"{pkg.name}: synth failed", file=sys.stderr)
                return 1
            tasks += _lines(out / "tasks.jsonl")
            golds += _lines(out / "gold.jsonl")
            for folder in sorted((out / "repos").iterdir()):
                shutil.rmtree(HERE / "repos" / folder.name, ignore_errors=True)
                shutil.copytree(folder, HERE / "repos" / folder.name)
    (HERE / "tasks.jsonl").write_text("".join(x + "\n" for x in tasks))
    (HERE / "gold.jsonl").write_text("".join(x + "\n" for x in golds))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "agentflow" / "wide-tasks-sdists")
    parser.add_argument("--synth", action="store_true", help="re-run agentflow tasks synth --hide-tests (Docker)")
    args = parser.parse_args(argv)
    if args.synth:
        return synth(args.cache)
    make_repos(args.cache)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
