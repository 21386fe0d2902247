"""`agentflow tasks synth`: SWE-bench-format tasks from a repository and its own test suite.

The suite runs once at the clean state in a sandbox (repository code is untrusted); each candidate bug
(`synth.mutate`, `synth.rewrite`, in the seed's order) is written into it, the test files reaching the mutated
function run, and it is kept when 1 to `max_failing` passing tests now fail (one task per function). A kept
candidate becomes a task folder at the buggy state, a task line and a gold line (the reverse patch), checked
the way `agentflow eval` grades in fresh sandboxes; a task failing that check is dropped. The steps in full:
docs/concepts/swe.md.
"""

from __future__ import annotations

import itertools
import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from agentflow.config import StrictConfig
from agentflow.errors import UserError
from agentflow.sandbox.base import Sandbox, sh_command
from agentflow.sandbox.config import SandboxConfig
from agentflow.swe.evaluate import run_prediction, sandbox_python
from agentflow.swe.hostgit import OwnRepo, git
from agentflow.swe.tasks import SWETask
from agentflow.swe.testrun import ERROR, FAILED, PASSED, TestRun, default_test_cmd, maintained, run_tests
from agentflow.swe.workspace import EVAL_DIR, SNAPSHOT_ENV, copy_files, seed_workspace, snapshot_commit
from agentflow.synth.hide import cut_functions, hidden_functions, is_hidden, snippet_of
from agentflow.synth.layout import reaching_tests, repo_files, source_files, suite_files
from agentflow.synth.mutate import OPERATORS, Mutation, file_mutations
from agentflow.synth.statement import (
    Failure,
    behaviour_report,
    check_statement,
    failing_test_code,
    failing_test_report,
    read_failure,
    scrub,
    user_report,
)

CREATED_AT = "2024-01-01T00:00:00Z"
"""Every synthesized task's `created_at` (fixed: the files depend on the repository and the seed only)."""


class SynthConfig(StrictConfig):
    """Settings of `agentflow tasks synth`."""

    seed: int = 0
    """Orders the candidates; the same seed on the same repository writes the same files."""
    limit: int = Field(default=5, ge=1)
    """Tasks to make (stops once this many are kept)."""
    max_candidates: int = Field(default=40, ge=1)
    """Candidates to try at most (each one is a test run)."""
    max_failing: int = Field(default=10, ge=1)
    """A candidate is kept when 1 to this many tests fail."""
    operators: list[str] = Field(default_factory=lambda: list(OPERATORS))
    statement: Literal["test", "behaviour", "mixed"] = "mixed"
    """Problem statements: the failing-test report, the behaviour report (where derivable), or a seeded mix."""
    name: str | None = None
    """Package name in instance ids and folders (default: the repository folder's name)."""
    version: str = ""
    backend: Literal["docker", "local", "auto"] = "docker"
    """Where the tests run: the Docker sandbox (default), or a temp folder (`local`, NOT a security boundary)."""
    candidate_timeout_s: float | None = Field(default=None, gt=0)
    """Time bound of one candidate's test run (default: 3x the full suite's time at the clean state, at least 30 s)."""
    suite_timeout_s: float = Field(default=900.0, gt=0)
    """Time bound of the full suite's run at the clean state."""
    full_suite_under_s: float = Field(default=20.0, ge=0)
    """When the whole suite takes less than this, every candidate runs all of it; else only the test files
    that name the mutated function (or its class or module)."""
    rewrite_model: str | None = None
    """Model spec for model-written bug rewrites (off by default)."""
    rewrites: int = Field(default=3, ge=0)
    """How many functions the rewrite model is asked to break (with `rewrite_model`)."""
    sandbox: SandboxConfig = Field(default_factory=lambda: SandboxConfig.model_validate({"sandbox_timeout_s": 14400.0}))
    hide_tests: bool = False
    """Hide the failing tests, as SWE-bench does: they are cut from the task's repository (its suite passes at
    the base), its `test_patch` puts them back at grading, and the statement is a user's report naming no test."""


@dataclass
class SynthReport:
    """What a run did: counts by outcome, the tasks written, the time taken."""

    tasks: list[str] = field(default_factory=list)
    candidates: int = 0
    tried: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    tests: int = 0
    passing: int = 0
    suite_s: float = 0.0
    duration_s: float = 0.0

    def drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1


@dataclass(frozen=True)
class Kept:
    """A candidate the tests catch, with what the task needs."""

    mutation: Mutation
    failing: list[str]
    passing: list[str]
    output: str


@dataclass
class Context:
    """The clean repository and what the run learnt about it."""

    repo: Path
    clean: Path
    files: list[str]
    tests: dict[str, str]
    texts: dict[str, str]
    passing: set[str]
    seen: set[str]
    """Every test id of the clean run."""
    config: SynthConfig
    python: str
    test_cmd: str
    env: dict[str, str] | None
    timeout: float
    run_all: bool
    name: str
    report: SynthReport
    log: Callable[[str], None]


def package_name(repo: Path, given: str | None) -> str:
    name = given or repo.resolve().name
    clean = "".join(c if c.isalnum() or c in "-_." else "-" for c in name).strip("-.")
    if not clean:
        raise UserError(f"cannot make a package name of {name!r}", hint="give one with --name")
    return clean


def check_inputs(repo: Path, out: Path, config: SynthConfig) -> None:
    """Bad input is a one-line UserError before anything runs."""
    if not repo.is_dir():
        raise UserError(f"repository {repo} is not a folder", hint="give the folder of a Python project")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"output folder {out} exists and is not empty", hint="give a new folder with -o")
    real_out, real_repo = out.resolve(), repo.resolve()
    if real_out == real_repo or real_repo in real_out.parents:
        raise UserError(f"output folder {out} is inside the repository {repo}", hint="write the tasks elsewhere")
    unknown = [op for op in config.operators if op not in OPERATORS]
    if unknown:
        raise UserError(f"unknown operator {unknown[0]!r}", hint=f"known: {', '.join(OPERATORS)}")


async def synthesize(repo: str | Path, out: str | Path, config: SynthConfig | None = None, *,
                     log: Callable[[str], None] = lambda _: None) -> SynthReport:
    """Write `out/tasks.jsonl`, `out/gold.jsonl` and `out/repos/` from `repo`; return what happened."""
    from agentflow.sandbox import open_sandbox, resolve_backend

    config = config or SynthConfig()
    repo, out = Path(repo), Path(out)
    check_inputs(repo, out, config)
    started = time.monotonic()
    files = repo_files(repo)
    sources = source_files(repo, files)
    tests = suite_files(files)
    if not sources:
        raise UserError(f"{repo}: no package source files found", hint="give the folder holding the package (or its src/)")
    if not tests:
        raise UserError(f"{repo}: no test files (test_*.py, *_test.py) found", hint="synth needs the repository's own tests")
    backend = resolve_backend(config.backend)
    report = SynthReport()
    with tempfile.TemporaryDirectory(prefix="agentflow-synth-") as tmp:
        clean = Path(tmp) / "clean"
        copy_files(repo, clean, files)
        async with open_sandbox(backend, config.sandbox) as sandbox:
            ctx = await _baseline(sandbox, repo, clean, files, tests, config, backend, report, log)
            candidates = await _candidates(ctx, sources)
            kept = await _search(sandbox, ctx, candidates)
        out.mkdir(parents=True, exist_ok=True)
        made = [m for k, found in enumerate(kept, start=1)
                if (m := await _make_task(ctx, found, out, k, backend)) is not None]
    report.tasks = [task["instance_id"] for task, _ in made]
    for name, records in (("tasks.jsonl", [t for t, _ in made]), ("gold.jsonl", [g for _, g in made])):
        (out / name).write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    report.duration_s = round(time.monotonic() - started, 1)
    return report


async def _baseline(sandbox: Sandbox, repo: Path, clean: Path, files: list[str], tests: list[str],
                    config: SynthConfig, backend: str, report: SynthReport, log: Callable[[str], None]) -> Context:
    """Seed the sandbox with the clean state and run the whole suite once."""
    with tempfile.TemporaryDirectory(prefix="agentflow-synth-git-") as tmp:
        head = snapshot_commit(clean, Path(tmp) / "r")
    task = SWETask(instance_id="synth-clean", repo=str(clean), base_commit=head, FAIL_TO_PASS=[])
    python = sandbox_python(sandbox)
    await seed_workspace(sandbox, task, python=python)
    test_cmd = default_test_cmd(python) + " --tb=short --color=no --continue-on-collection-errors"
    # one hash seed for every run: a set's order in pytest's output, and so in a statement, is the same each time
    env = {"PYTHONHASHSEED": "0"}
    if backend == "local":
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    log(f"running the whole suite ({len(tests)} test files) at the clean state")
    started = time.monotonic()
    run = await run_tests(sandbox, tests, test_cmd=test_cmd, scratch=EVAL_DIR, timeout=config.suite_timeout_s, env=env)
    report.suite_s = round(time.monotonic() - started, 1)
    if run.timed_out:
        raise UserError(f"{repo}: the test suite did not finish in {config.suite_timeout_s:.0f}s at the clean state",
                        hint="raise --suite-timeout")
    passing = {t for t, s in run.status.items() if s == PASSED}
    report.tests, report.passing = len(run.status), len(passing)
    if not passing:
        tail = run.log.strip().splitlines()[-1:] or ["no output"]
        raise UserError(f"{repo}: no test passes at the clean state (last line: {tail[0][:200]})",
                        hint="check that the suite runs with pytest in the sandbox image")
    log(f"{len(passing)} of {len(run.status)} tests pass ({report.suite_s}s)")
    timeout = config.candidate_timeout_s or max(30.0, 3 * report.suite_s)
    return Context(
        repo=repo, clean=clean, files=files, tests={t: (clean / t).read_text(encoding="utf-8", errors="replace") for t in tests},
        texts={}, passing=passing, seen=set(run.status), config=config, python=python, test_cmd=test_cmd, env=env, timeout=timeout,
        run_all=report.suite_s < config.full_suite_under_s, name=package_name(repo, config.name), report=report, log=log,
    )


async def _candidates(ctx: Context, sources: list[str]) -> list[Mutation]:
    """All procedural mutations (and model rewrites), in the seed's order: each family shuffled, then taken in turn."""
    by_family: dict[str, list[Mutation]] = {}
    for path in sources:
        text = (ctx.clean / path).read_text(encoding="utf-8", errors="replace")
        ctx.texts[path] = text
        for mutation in file_mutations(path, text, tuple(ctx.config.operators)):
            by_family.setdefault(mutation.operator, []).append(mutation)
    if ctx.config.rewrite_model:
        from agentflow.synth.rewrite import model_rewrites

        rewrites = await model_rewrites(ctx.config.rewrite_model, ctx.texts, ctx.config.rewrites, ctx.config.seed)
        by_family["model-rewrite"] = rewrites
    rng = random.Random(ctx.config.seed)
    families = sorted(by_family)
    for family in families:
        rng.shuffle(by_family[family])
    rng.shuffle(families)
    turns = itertools.zip_longest(*(by_family[f] for f in families))  # one of each family in turn
    ordered = [m for turn in turns for m in turn if m is not None]
    ctx.report.candidates = len(ordered)
    return ordered


async def _search(sandbox: Sandbox, ctx: Context, candidates: list[Mutation]) -> list[Kept]:
    """Try candidates in order until `limit` are kept or `max_candidates` are tried."""
    kept: list[Kept] = []
    used: set[str] = set()
    for mutation in candidates:
        if len(kept) >= ctx.config.limit or ctx.report.tried >= ctx.config.max_candidates:
            break
        where = f"{mutation.path}:{mutation.function}"
        if where in used:
            continue
        ctx.report.tried += 1
        found = await _try(sandbox, ctx, mutation)
        if found is not None:
            kept.append(found)
            used.add(where)
            ctx.log(f"kept {mutation.operator} in {where} ({len(found.failing)} failing)")
    return kept


async def _try(sandbox: Sandbox, ctx: Context, mutation: Mutation) -> Kept | None:
    """Run the tests on one candidate; the file is put back whatever happens."""
    original = ctx.texts[mutation.path]
    files = sorted(ctx.tests) if ctx.run_all else reaching_tests(ctx.tests, mutation.path, mutation.function)
    await sandbox.write_file(mutation.path, mutation.apply(original))
    try:
        run = await run_tests(sandbox, files, test_cmd=ctx.test_cmd, scratch=EVAL_DIR, timeout=ctx.timeout, env=ctx.env)
    finally:
        await sandbox.write_file(mutation.path, original)
        await sandbox.exec(sh_command(f"git checkout -q -- . && git clean -fdq -e {EVAL_DIR}"))
    return _judge(ctx, mutation, files, run)


def _judge(ctx: Context, mutation: Mutation, files: list[str], run: TestRun) -> Kept | None:
    if run.timed_out:
        ctx.report.drop("timed out")
        return None
    ran = set(files)
    in_run = [t for t in sorted(ctx.passing) if t.split("::", 1)[0] in ran]
    failing = _not_maintained(ctx, in_run, run)
    if not failing:
        ctx.report.drop("no test fails")
        return None
    if len(failing) > ctx.config.max_failing:
        ctx.report.drop("too many tests fail")
        return None
    if not any(run.status.get(t) in (FAILED, ERROR) for t in failing):
        ctx.report.drop("failing tests did not run")
        return None
    homes = {t.split("::", 1)[0] for t in failing}
    passing = [t for t in in_run if t.split("::", 1)[0] in homes and run.status.get(t) == PASSED]
    return Kept(mutation, failing, passing, run.log)


def _not_maintained(ctx: Context, tests: list[str], run: TestRun) -> list[str]:
    """Those of `tests` (they passed at the clean state) that `run` did not keep passing. A file whose run names
    tests the clean run did not (ids holding a memory address, a time) renames them per run: its missing ids are
    renamed, not failing; elsewhere a missing id is a test that did not pass."""
    renaming = {t.split("::", 1)[0] for t in run.status if t not in ctx.seen}
    return [t for t in tests if not maintained(t, run.status)
            and (t in run.status or t.split("::", 1)[0] not in renaming)]


def statement_for(ctx: Context, found: Kept, k: int) -> str | None:
    """The task's problem statement (the kind the config asks for), or None when none can be written
    without naming the changed file or line. A hidden-tests task's statement is the behaviour report (unless
    `--statement test`) where one can be derived, else the user's report of the first failing test; neither
    names a test, its file or the change."""
    m, hide = found.mutation, ctx.config.hide_tests
    forbidden = [m.path, m.path.removeprefix("src/"), *m.old_lines, *m.new_lines]
    failures = [f for t in found.failing if (f := read_failure(t, found.output, set(ctx.tests))) is not None]
    if hide:
        hidden = hidden_functions(found.failing)
        names = sorted({name for functions in hidden.values() for function in functions for name in function})
        forbidden += [*found.failing, *hidden, *names]
        if not failures:
            return None
    elif not failures:
        failures = [Failure(found.failing[0], ["(pytest printed no traceback for this test)"], "", [])]
    kind = ctx.config.statement
    if kind == "mixed" and not hide:
        kind = random.Random(f"{ctx.config.seed}:{k}").choice(["test", "behaviour"])
    text = None
    if kind != "test":
        text = next((b for f in failures if (b := behaviour_report(f, cite_test=not hide)) is not None), None)
    if text is None:
        first = failures[0].test_id
        test_file = ctx.tests.get(first.split("::", 1)[0], "")
        text = (user_report(failures[0], snippet_of(test_file, first), len(found.failing) - 1) if hide
                else failing_test_report(failures, failing_test_code(test_file, first), found.failing))
    text = scrub(text, forbidden)
    return text if check_statement(text, forbidden) else None


def hide_failing_tests(repo: Path, ctx: Context, failing: list[str]) -> bool:
    """Cut the failing tests' functions from the test files in `repo` (the task's folder); False when one is
    not defined in its file (inherited, generated) and so cannot be hidden."""
    for path, functions in hidden_functions(failing).items():
        cut = cut_functions(ctx.tests.get(path, ""), functions)
        if cut is None:
            return False
        (repo / path).write_text(cut, encoding="utf-8")
    return True


def _diff_to_clean(repo: Path, clean: Path, paths: list[str]) -> tuple[str, str]:
    """(snapshot commit of the task's folder `repo`, the diff that puts the clean files `paths` back into it): the
    gold patch (the changed source file) and a hidden-tests task's test patch (the cut test files)."""
    with tempfile.TemporaryDirectory(prefix="agentflow-synth-diff-") as tmp:
        work = Path(tmp) / "r"
        head = snapshot_commit(repo, work)
        for path in paths:
            (work / path).write_bytes((clean / path).read_bytes())
        # `work` is a repository agentflow just made (`snapshot_commit`)
        diff = git(["diff", "--no-color", "--no-ext-diff"], OwnRepo(work), env=SNAPSHOT_ENV).decode("utf-8")
    return head, diff


async def _make_task(ctx: Context, found: Kept, out: Path, k: int,
                     backend: Literal["docker", "local"]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Write the task's repository folder and records, then check them the way `agentflow eval` grades."""
    m, seed = found.mutation, ctx.config.seed
    statement = statement_for(ctx, found, k)
    if statement is None:
        ctx.report.drop("statement would name the change")
        return None
    folder = f"{ctx.name}-s{seed}-{k}"
    repo = out / "repos" / folder
    copy_files(ctx.clean, repo, ctx.files)
    (repo / m.path).write_text(m.apply(ctx.texts[m.path]), encoding="utf-8")
    if ctx.config.hide_tests and not hide_failing_tests(repo, ctx, found.failing):
        ctx.report.drop("failing tests cannot be hidden")
        shutil.rmtree(repo)
        return None
    base_commit, patch = _diff_to_clean(repo, ctx.clean, [m.path])
    test_patch = _diff_to_clean(repo, ctx.clean, list(hidden_functions(found.failing)))[1] if ctx.config.hide_tests else ""
    task = {
        "instance_id": f"{ctx.name}__{ctx.name}-s{seed}-{k}", "repo": f"repos/{folder}", "base_commit": base_commit,
        "problem_statement": statement, "hints_text": "", "created_at": CREATED_AT, "version": ctx.config.version,
        "environment_setup_commit": base_commit, "FAIL_TO_PASS": json.dumps(found.failing),
        "PASS_TO_PASS": json.dumps(found.passing), "test_patch": test_patch, "patch": patch,
        "gold_functions": [f"{m.path}:{m.function}"], "bug_kind": m.operator,
    }
    gold = {"instance_id": task["instance_id"], "model_name_or_path": "gold", "model_patch": patch}
    problem = await fresh_clone_check(SWETask.model_validate({**task, "base_dir": str(out.resolve())}), ctx, backend)
    if problem is not None:
        ctx.log(f"dropped {task['instance_id']}: {problem}")
        ctx.report.drop("fresh-clone check failed")
        shutil.rmtree(repo)
        return None
    return task, gold


async def fresh_clone_check(task: SWETask, ctx: Context, backend: Literal["docker", "local"]) -> str | None:
    """None when, each in a fresh sandbox from the task's folder, FAIL_TO_PASS fails and PASS_TO_PASS passes at
    the base, and the gold patch resolves the task (both with its `test_patch`, as `agentflow eval` grades),
    and a hidden-tests task's remaining suite passes at the base without it; else what went wrong."""
    from agentflow.sandbox import open_sandbox

    async with open_sandbox(backend, ctx.config.sandbox) as sandbox:
        base = await run_prediction(sandbox, task, None, python=ctx.python, test_timeout_s=ctx.timeout,
                                    rerun_failed=False, run_empty=True)
    status = base.tests_status
    if not base.completed or status["FAIL_TO_PASS"]["success"] or status["PASS_TO_PASS"]["failure"]:
        return f"at the base: {base.error or status}"
    async with open_sandbox(backend, ctx.config.sandbox) as sandbox:
        gold = await run_prediction(sandbox, task, task.patch, python=ctx.python, test_timeout_s=ctx.timeout,
                                    rerun_failed=False)
    if not gold.resolved:
        return f"the gold patch does not resolve it: {gold.error or gold.tests_status}"
    return await remaining_suite_check(task, ctx, backend) if task.test_patch.strip() else None


async def remaining_suite_check(task: SWETask, ctx: Context, backend: Literal["docker", "local"]) -> str | None:
    """None when, in a fresh sandbox at the base without the test patch, every test that passed at the clean
    state and was not hidden passes (a hidden-tests task's suite is green); else the tests that do not."""
    from agentflow.sandbox import open_sandbox

    hidden = hidden_functions(task.FAIL_TO_PASS)
    async with open_sandbox(backend, ctx.config.sandbox) as sandbox:
        await seed_workspace(sandbox, task, python=ctx.python)
        run = await run_tests(sandbox, sorted(ctx.tests), test_cmd=ctx.test_cmd, scratch=EVAL_DIR,
                              timeout=ctx.config.suite_timeout_s, env=ctx.env)
    if run.timed_out:
        return "without the test patch, the suite timed out"
    broken = _not_maintained(ctx, [t for t in sorted(ctx.passing) if not is_hidden(t, hidden)], run)
    return f"without the test patch, {len(broken)} tests fail: {broken[:5]}" if broken else None
