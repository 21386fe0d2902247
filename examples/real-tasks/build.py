"""Build the real-package task set: pinned PyPI sdists, one injected single-site bug per task.

Deterministic: the sdists are pinned (version + sha256), the bugs are fixed text edits listed in
`bugs.py`, and the repositories become commits with `agentflow.swe.workspace.snapshot_commit` (fixed
identity and dates), so running it twice writes the same files, the same `base_commit`s and the same
test lists. Nothing is random (so there is no seed to set).

For every task it
1. unpacks the package's sdist as published (`repos/<task>/`, one folder per task: each holds the BUGGY
   state, as a task's base commit does): its layout (a `src/` package stays in `src/`), its tests and its own
   test configuration untouched; only what the sdist build generated (`PKG-INFO`, `*.egg-info`) and git's
   metadata files (`.gitignore`, `.gitattributes`: inside this repository they would apply to its own files)
   are left out;
2. applies the bug (an exact text replacement that must match once);
3. runs the package's own test files in the sandbox image (`docker run --network none`; or the host
   python with `--runner host`) at the buggy and at the clean state, in the environment agentflow's test runs
   get (`agentflow.swe.testrun.test_env`: the root and `src/` importable, the test-time requirements installed
   from `wheelhouse/`);
4. FAIL_TO_PASS = tests failing with the bug and passing without it; PASS_TO_PASS = tests passing in
   both, limited to the test files that hold a FAIL_TO_PASS test (keeps each evaluation short);
5. writes `tasks.jsonl` (SWE-bench fields, plus `gold_functions` and `bug_kind`, which `SWETask`
   ignores) and `gold.jsonl` (the patch that reverts the bug).

Usage (from the repository root):
    PYTHONPATH=. .venv/bin/python examples/real-tasks/build.py [--runner docker|host] [--only TASK ...]
    PYTHONPATH=. .venv/bin/python examples/real-tasks/build.py --statements-only   # after editing reports
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bugs import BUGS, Bug

from agentflow.swe.workspace import snapshot_commit
from agentflow.synth.sdist import fetch_sdist, unpack_sdist

IMAGE = "agentflow-sandbox:0.1.0"
WHEEL_SHA256 = {
    "packaging-24.1-py3-none-any.whl": "5b8f2217dbdbd2f7f384c41c628544e6d52f2d0f53c6d0c3ea61aa5d1d7ff124",
    "pytest_cov-5.0.0-py3-none-any.whl": "4f0764a1219df53214206bf1feea4633c3b558a2925c8b59f144f682861ce652",
    "coverage-7.6.11-py3-none-any.whl": "f0f334ae844675420164175bf32b04e18a81fe57ad8eb7e0cfd4689d681ffed7",
}
"""The wheelhouse's wheels, pinned like the sdists."""
CREATED_AT = "2024-01-01T00:00:00Z"


@dataclass(frozen=True)
class Package:
    """A pinned sdist (a task repository is the whole sdist, as published)."""

    name: str
    version: str
    sha256: str
    license: str
    requirements: list[str] = field(default_factory=list)
    """Test-time requirements the package's own test set-up needs, installed offline from `wheelhouse/`
    (each listed: a wheelhouse is installed without resolving dependencies)."""
    unportable: tuple[str, ...] = ()
    """Tests whose outcome depends on how the Python was built (left out of both lists, so the local
    backend grades like the sandbox image)."""


PACKAGES = {
    p.name: p
    for p in [
        Package("tabulate", "0.9.0", "0095b12bf5966de529c0feb1fa08671671b3368eec77d7ef7ab114be2c068b3c", "MIT"),
        Package("more-itertools", "10.5.0", "5482bfef7849c25dc3c6dd53a6173ae4795da2a41a80faea6700d9f5846c5da6", "MIT"),
        Package("toolz", "1.0.0", "2c86e3d9a04798ac556793bced838816296a2f085017664e4995cb40a1047a02", "BSD-3-Clause"),
        # a src-layout package whose own pytest configuration (setup.cfg) turns on pytest-cov and whose conftest
        # imports packaging: three test-only requirements
        Package("semver", "3.0.2", "6253adb39c70f6e51afed2fa7152bcd414c411286088fb4b9effb133885ab4cc", "BSD-3-Clause",
                requirements=["packaging==24.1", "pytest-cov==5.0.0", "coverage==7.6.11"]),
        Package("cachetools", "5.5.0", "2cc24fb4cbe39633fb7badd9db9ca6295d766d9c2995f245725a46715d050f2a", "MIT"),
        Package("parse", "1.20.2", "b41d604d16503c79d81af5165155c0b20f6c8d6c559efa66b4b695c3e5a0a0ce", "MIT"),
        Package("inflection", "0.5.1", "1a29730d366e996aaacffb2f1f1cb9593dc38e2ddd30c91250c6dde09ea9b417", "MIT"),
        Package("six", "1.16.0", "1e61c37477a1626458e36f7b1d82aa5c9b094fa4802892072e49de9c60c4c926", "MIT",
                unportable=("test_six.py::test_move_items[dbm_ndbm]",)),  # needs the optional _dbm module
    ]
}


# Collects every test's outcome into $OUTCOMES_FILE (node id -> passed/failed/skipped).
OUTCOMES_PLUGIN = '''
import json, os
_out = {}
def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        prev = _out.get(report.nodeid)
        if prev != "failed":
            _out[report.nodeid] = "skipped" if report.skipped else report.outcome
def pytest_sessionfinish(session):
    with open(os.environ["OUTCOMES_FILE"], "w") as fh:
        json.dump(_out, fh, sort_keys=True)
'''


def unpack_clean(pkg: Package, cache: Path, dest: Path) -> None:
    """The package's pinned sdist as published in `dest`, less `synth.sdist.LEFT_OUT`."""
    unpack_sdist(fetch_sdist(pkg.name, pkg.version, pkg.sha256, cache), dest)


def inject(repo: Path, bug: Bug) -> None:
    path = repo / bug.file
    text = path.read_text()
    if text.count(bug.old) != 1:
        raise SystemExit(f"{bug.task}: the text to replace occurs {text.count(bug.old)} times in {bug.file}")
    path.write_text(text.replace(bug.old, bug.new))


def _install(pkg: Package, python: str, wheels: str, site: str) -> list[str]:
    """The command installing the package's test-time requirements into `site`, as agentflow's
    `swe.workspace.install_requirements` does (offline, each wheel as listed)."""
    return [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-input", "--no-index",
            "--find-links", wheels, "--no-deps", "--target", site, *pkg.requirements]


def run_suite(repo: Path, pkg: Package, runner: str, wheelhouse: Path, files: list[str] | None = None) -> dict[str, str]:
    """Outcome of every test of the repository's suite (or of `files`), run in a throw-away copy with the
    environment of agentflow's test runs: the repository root and its `src/` importable, the requirements in
    `site` (`swe.testrun.test_env`)."""
    with tempfile.TemporaryDirectory() as tmp:
        work, aux = Path(tmp) / "w", Path(tmp) / "aux"
        shutil.copytree(repo, work)
        aux.mkdir()
        (aux / "outcomes_plugin.py").write_text(OUTCOMES_PLUGIN)
        for p in (Path(tmp), work, aux):
            p.chmod(0o777)
        args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "outcomes_plugin", *(files or [])]
        src = (work / "src").is_dir()
        if runner == "docker":
            setup = " ".join(_install(pkg, "python3", "/wheels", "/aux/site")) + " && " if pkg.requirements else ""
            path = "/workspace" + (":/workspace/src" if src else "") + ":/aux/site:/aux"
            cmd = ["docker", "run", "--rm", "--network", "none", "-v", f"{work}:/workspace", "-v", f"{aux}:/aux",
                   "-v", f"{wheelhouse}:/wheels:ro", "-e", "OUTCOMES_FILE=/aux/outcomes.json",
                   "-e", f"PYTHONPATH={path}", "-e", "PYTHONDONTWRITEBYTECODE=1", IMAGE,
                   "sh", "-c", setup + "python3 " + " ".join(args)]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        else:
            if pkg.requirements:
                subprocess.run(_install(pkg, sys.executable, str(wheelhouse), str(aux / "site")), check=True)
            path = [str(work), *([str(work / "src")] if src else []), str(aux / "site"), str(aux)]
            env = {**os.environ, "OUTCOMES_FILE": str(aux / "outcomes.json"), "PYTHONPATH": os.pathsep.join(path),
                   "PYTHONDONTWRITEBYTECODE": "1"}
            proc = subprocess.run([sys.executable, *args], cwd=work, env=env, capture_output=True, text=True, check=False)
        out = aux / "outcomes.json"
        if not out.exists():
            raise SystemExit(f"{repo}: the test run gave no outcomes:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return json.loads(out.read_text())


def gold_patch(buggy: Path, clean: Path) -> tuple[str, str]:
    """(base_commit of the buggy folder, diff from it to the clean tree)."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "r"
        head = snapshot_commit(buggy, repo)
        for rel in (p.relative_to(clean) for p in clean.rglob("*") if p.is_file()):
            (repo / rel).write_bytes((clean / rel).read_bytes())
        diff = subprocess.run(["git", "diff", "--no-color", "--no-ext-diff"], cwd=repo, capture_output=True,
                              text=True, check=True).stdout
    return head, diff


def build_task(bug: Bug, cache: Path, runner: str, wheelhouse: Path) -> tuple[dict, dict]:
    """Write `repos/<task>/` at the buggy state; return the task record and its gold prediction."""
    pkg = PACKAGES[bug.package]
    repo = HERE / "repos" / bug.task
    shutil.rmtree(repo, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        clean = Path(tmp) / "clean"
        unpack_clean(pkg, cache, clean)
        shutil.copytree(clean, repo)
        inject(repo, bug)
        base_commit, patch = gold_patch(repo, clean)
        buggy_status = run_suite(repo, pkg, runner, wheelhouse)
        failing = sorted(t for t, s in buggy_status.items() if s == "failed")
        files = sorted({t.split("::", 1)[0] for t in failing})
        clean_status = run_suite(clean, pkg, runner, wheelhouse, files)
    f2p = [t for t in failing if clean_status.get(t) == "passed" and t not in pkg.unportable]
    if not f2p:
        raise SystemExit(f"{bug.task}: no test of the suite catches the bug")
    in_files = {t for t in buggy_status if t.split("::", 1)[0] in files}
    p2p = sorted(
        t for t in in_files
        if buggy_status[t] == "passed" and clean_status.get(t) == "passed" and t not in pkg.unportable
    )
    task = {
        "instance_id": f"{bug.package.replace('-', '_')}__{bug.task}",
        "repo": f"repos/{bug.task}",
        "base_commit": base_commit,
        "problem_statement": bug.statement.strip() + "\n",
        "hints_text": "",
        "created_at": CREATED_AT,
        "version": pkg.version,
        "environment_setup_commit": base_commit,
        "FAIL_TO_PASS": json.dumps(f2p),
        "PASS_TO_PASS": json.dumps(p2p),
        "test_patch": "",
        "patch": patch,
        "requirements": pkg.requirements,
        "wheelhouse": "wheelhouse" if pkg.requirements else None,
        "gold_functions": list(bug.functions),
        "bug_kind": bug.kind,
    }
    if not pkg.requirements:
        del task["requirements"], task["wheelhouse"]
    gold = {"instance_id": task["instance_id"], "model_name_or_path": "gold", "model_patch": patch}
    return task, gold


def fetch_wheels(wheelhouse: Path) -> None:
    """Test-time requirements as wheels (pure Python, pinned), for offline installs in the sandbox."""
    wanted = sorted({r for p in PACKAGES.values() for r in p.requirements})
    have = {w.name.split("-")[0].lower().replace("_", "-") + "==" + w.name.split("-")[1] for w in wheelhouse.glob("*.whl")}
    missing = [r for r in wanted if r.lower() not in have]
    if missing:  # pure-Python wheels only (`any` platform): the sandbox's Python and the host's may differ
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                        "--platform", "any", "--implementation", "py", "--python-version", "3.11",
                        *missing, "-d", str(wheelhouse)], check=True)
    for wheel in sorted(wheelhouse.glob("*.whl")):
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if WHEEL_SHA256.get(wheel.name) != digest:
            raise SystemExit(f"{wheel}: sha256 {digest} is not pinned in WHEEL_SHA256")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runner", choices=["docker", "host"], default="docker",
                        help="where the suites run: the sandbox image (default) or this python")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "agentflow" / "real-tasks-sdists",
                        help="where the downloaded sdists are kept")
    parser.add_argument("--only", nargs="*", help="rebuild only these tasks (keeps the other lines)")
    parser.add_argument("--statements-only", action="store_true",
                        help="only rewrite the problem statements of tasks.jsonl from bugs.py (no test runs)")
    args = parser.parse_args(argv)
    if args.statements_only:
        return refresh_statements()
    wheelhouse = HERE / "wheelhouse"
    wheelhouse.mkdir(exist_ok=True)
    fetch_wheels(wheelhouse)
    old_tasks = {json.loads(line)["instance_id"]: line for line in _lines(HERE / "tasks.jsonl")}
    old_gold = {json.loads(line)["instance_id"]: line for line in _lines(HERE / "gold.jsonl")}
    tasks, golds, failed = [], [], []
    for bug in BUGS:
        iid = f"{bug.package.replace('-', '_')}__{bug.task}"
        if args.only and bug.task not in args.only and iid in old_tasks:
            tasks.append(old_tasks[iid])
            golds.append(old_gold[iid])
            continue
        try:
            task, gold = build_task(bug, args.cache, args.runner, wheelhouse)
        except SystemExit as exc:
            failed.append(str(exc))
            print(exc, file=sys.stderr, flush=True)
            continue
        print(f"{iid}: {len(json.loads(task['FAIL_TO_PASS']))} FAIL_TO_PASS, "
              f"{len(json.loads(task['PASS_TO_PASS']))} PASS_TO_PASS", flush=True)
        tasks.append(json.dumps(task))
        golds.append(json.dumps(gold))
    (HERE / "tasks.jsonl").write_text("".join(t + "\n" for t in tasks))
    (HERE / "gold.jsonl").write_text("".join(g + "\n" for g in golds))
    return 1 if failed else 0


def refresh_statements() -> int:
    """Rewrite each task's statement, gold functions and bug kind from bugs.py; the repositories and test lists stay."""
    by_task = {bug.task: bug for bug in BUGS}
    out = []
    for line in _lines(HERE / "tasks.jsonl"):
        task = json.loads(line)
        bug = by_task[task["repo"].removeprefix("repos/")]
        task.update(problem_statement=bug.statement.strip() + "\n", gold_functions=list(bug.functions), bug_kind=bug.kind)
        out.append(json.dumps(task))
    (HERE / "tasks.jsonl").write_text("".join(t + "\n" for t in out))
    return 0


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


if __name__ == "__main__":
    raise SystemExit(main())
