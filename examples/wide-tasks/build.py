"""The wide task set: published PyPI packages (none of examples/real-tasks' 8), tasks made by `agentflow tasks synth`.

The repository carries only `tasks.jsonl` and `gold.jsonl`; the task folders (`repos/`, git-ignored) are made
from the pinned sdists:

    PYTHONPATH=. .venv/bin/python examples/wide-tasks/build.py             # fetch, verify, make repos/
    PYTHONPATH=. .venv/bin/python examples/wide-tasks/build.py --synth     # re-run synth for every package
    PYTHONPATH=. .venv/bin/python examples/wide-tasks/build.py --synth --only idna

Making `repos/`: each sdist is downloaded once (`pip download --no-deps --no-binary :all:`, PyPI only) into
`~/.cache/agentflow/wide-tasks-sdists`, its sha256 checked, unpacked less what the sdist build generated and
git's metadata files (as examples/real-tasks), and every task's folder is that tree with its gold patch
reversed (`git apply -R`); the folder's deterministic snapshot must be the task's `base_commit`, else the
build stops. `--synth` runs `agentflow tasks synth` on each clean tree (Docker sandbox, seed `SEED`) and
rewrites both files from its output.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 52


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    sha256: str
    license: str
    limit: int = 2
    """Tasks synth makes for the package."""
    candidates: int = 20
    """`--max-candidates` of its synth run."""
    max_failing: int = 10
    """`--max-failing` of its synth run (a heavily parametrized suite fails many ids for one bug)."""


PACKAGES = [
    Package("idna", "3.10", "12f65c9b470abda6dc35cf8e63cc574b1c52b11df2c86030af0ac09b01b13ea9", "BSD-3-Clause", 5, 30),
    Package("pathspec", "0.12.1", "a482d51503a1ab33b1c67a6c3813a26953dbdc71c31dacaef9a838c4e29f5712", "MPL-2.0", 5, 30),
    Package("exceptiongroup", "1.2.2", "47c2edf7c6738fafb49fd34290706d1a1a2f4d1c6df275526b62cbb4aa5393cc", "MIT", 2, 60),
    Package("boltons", "24.1.0", "4a49b7d57ee055b83a458c8682a2a6f199d263a8aa517098bda9bab813554b87", "BSD-3-Clause"),
    Package("colorama", "0.4.6", "08695f5cb7ed6e0531a20572697297273c47b8cae5a63ffc6d6ed5c201be6e44", "BSD-3-Clause"),
    Package("jmespath", "1.0.1", "90261b206d6defd58fdd5e85f478bf633a2901798906be2ad389150c5c60edbe", "MIT"),
    Package("xmltodict", "0.14.2", "201e7c28bb210e374999d1dde6382923ab0ed1a8a5faeece48ab525b7810a553", "MIT"),
    Package("tomlkit", "0.13.2", "fff5fe59a87295b278abd31bec92c15d9bc4a06885ab12bcea52c71119392e79", "MIT"),
    Package("pyparsing", "3.1.4", "f86ec8d1a83f11977c9a6ea7598e8c27fc5cddfa5b07ea2241edbbde1d7bc032", "MIT", 2, 12),
    Package("isodate", "0.7.2", "4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6", "BSD-3-Clause",
            max_failing=40),
    Package("networkx", "3.5", "d4c6f9cf81f52d69230866796b82afbccdec3db7ae4fbd1b65ea750feed50037", "BSD-3-Clause",
            max_failing=40),
    Package("toml", "0.10.2", "b3bda1d108d5dd99f4a20d24d9c348e91c4db7ab1b749200bded2f839ccbe68f", "MIT"),
]
BY_NAME = {p.name: p for p in PACKAGES}


def unpack_clean(pkg: Package, cache: Path, dest: Path) -> None:
    """The package's pinned sdist as published in `dest`, less `synth.sdist.LEFT_OUT`."""
    from agentflow.synth.sdist import fetch_sdist, unpack_sdist

    unpack_sdist(fetch_sdist(pkg.name, pkg.version, pkg.sha256, cache), dest)


def make_repos(tasks: list[dict], golds: dict[str, str], cache: Path) -> None:
    """Every task's folder: the clean tree with the gold patch reversed, checked against `base_commit`."""
    from agentflow.swe.workspace import snapshot_commit

    with tempfile.TemporaryDirectory() as tmp:
        for task in tasks:
            pkg = BY_NAME[task["instance_id"].split("__", 1)[0]]
            clean = Path(tmp) / pkg.name
            if not clean.exists():
                unpack_clean(pkg, cache, clean)
            repo = HERE / task["repo"]
            shutil.rmtree(repo, ignore_errors=True)
            shutil.copytree(clean, repo)
            # outside any repository (this folder is inside agentflow's: git would patch relative to its root)
            env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(repo.parent)}
            subprocess.run(["git", "apply", "-R"], cwd=repo, check=True, env=env,
                           input=golds[task["instance_id"]].encode())
            head = snapshot_commit(repo, Path(tmp) / f"check-{task['instance_id']}")
            if head != task["base_commit"]:
                raise SystemExit(f"{task['instance_id']}: repos/ snapshot {head[:12]} is not base_commit {task['base_commit'][:12]}")
            print(f"{task['repo']}: at {head[:12]}", flush=True)


def synth(pkgs: list[Package], cache: Path, args: argparse.Namespace) -> int:
    """Run `agentflow tasks synth` on each package's clean tree; merge the outputs into the two files."""
    tasks = {json.loads(x)["instance_id"]: x for x in _lines(HERE / "tasks.jsonl")}
    golds = {json.loads(x)["instance_id"]: x for x in _lines(HERE / "gold.jsonl")}
    for pkg in pkgs:
        with tempfile.TemporaryDirectory() as tmp:
            clean, out = Path(tmp) / pkg.name, Path(tmp) / "out"
            unpack_clean(pkg, cache, clean)
            cmd = [sys.executable, "-m", "agentflow.cli.main", "tasks", "synth", str(clean), "-o", str(out),
                   "--seed", str(SEED), "--limit", str(args.limit or pkg.limit), "--max-candidates",
                   str(args.max_candidates or pkg.candidates), "--max-failing", str(pkg.max_failing), "--name", pkg.name, "--version", pkg.version]
            print("$", " ".join(cmd[3:]), flush=True)
            if subprocess.run(cmd, check=False).returncode != 0:
                print(f"{pkg.name}: synth failed", file=sys.stderr)
                continue
            tasks = {json.loads(x)["instance_id"]: x for x in _lines(HERE / "tasks.jsonl")}
            golds = {json.loads(x)["instance_id"]: x for x in _lines(HERE / "gold.jsonl")}
            for iid in [i for i in tasks if i.startswith(f"{pkg.name}__")]:
                del tasks[iid], golds[iid]
            for line in _lines(out / "tasks.jsonl"):
                tasks[json.loads(line)["instance_id"]] = line
            for line in _lines(out / "gold.jsonl"):
                golds[json.loads(line)["instance_id"]] = line
            for folder in sorted((out / "repos").iterdir()):
                shutil.rmtree(HERE / "repos" / folder.name, ignore_errors=True)
                shutil.copytree(folder, HERE / "repos" / folder.name)
        order = sorted(tasks, key=_order)
        (HERE / "tasks.jsonl").write_text("".join(tasks[i] + "\n" for i in order))
        (HERE / "gold.jsonl").write_text("".join(golds[i] + "\n" for i in order))
    return 0


def _order(iid: str) -> tuple[int, int]:
    name, rest = iid.split("__", 1)
    return [p.name for p in PACKAGES].index(name), int(rest.rsplit("-", 1)[1])


def _lines(path: Path) -> list[str]:
    return [x for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "agentflow" / "wide-tasks-sdists")
    parser.add_argument("--synth", action="store_true", help="re-run agentflow tasks synth (Docker) and rewrite the files")
    parser.add_argument("--only", nargs="*", help="packages to synthesize (with --synth)")
    parser.add_argument("--limit", type=int, default=None, help="tasks per package (default: the package's)")
    parser.add_argument("--max-candidates", type=int, default=None, help="candidates per package (default: the package's)")
    args = parser.parse_args(argv)
    if args.synth:
        unknown = [n for n in args.only or [] if n not in BY_NAME]
        if unknown:
            raise SystemExit(f"unknown package {unknown[0]!r}: one of {', '.join(BY_NAME)}")
        return synth([BY_NAME[n] for n in args.only] if args.only else PACKAGES, args.cache, args)
    tasks = [json.loads(x) for x in _lines(HERE / "tasks.jsonl")]
    golds = {g["instance_id"]: g["model_patch"] for g in map(json.loads, _lines(HERE / "gold.jsonl"))}
    make_repos(tasks, golds, args.cache)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
