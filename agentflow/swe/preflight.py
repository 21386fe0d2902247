"""Pre-flight: can the repository's tests run at the base commit, in the sandbox, before any model is asked?

Tests that cannot run (a collection error, a package the sandbox cannot import, a missing command) would
report every candidate, the right fix included, as failing. So the test command runs once at the base commit
in the environment of every later run (`testrun.test_env`) and its outcome is classified: the tests ran, or
the cause they cannot and the user's fix. A suite that cannot be collected is read file by file
(`read_collection_errors`, `run_preflight`; docs/concepts/repair.md, "The pre-flight").
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, PrivateAttr

from agentflow.events.kinds import PreflightFindings
from agentflow.sandbox.base import ExecResult, Sandbox, sh_command
from agentflow.swe.testrun import (
    STOPPED_LINE,
    install_runner,
    runner_command,
    stop_env,
    test_env,
)
from agentflow.swe.workspace import EVAL_DIR, PYTHON_SHIM

_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)\b")
_MISSING = re.compile(r"(ModuleNotFoundError: No module named '[^']+'|ImportError: [^\n]+)")
_COLLECTING = re.compile(r"_+ ERROR collecting (\S+) _+")
_USAGE = re.compile(r"^\S*: error: (.+)$", re.MULTILINE)
_NOT_FOUND = re.compile(r"(?:^|: )(\S+): (?:command )?not found", re.MULTILINE)
FIRST_TESTS_PATH = f"{EVAL_DIR}/first_tests.txt"
"""The list of test files the runner starts with (`FIRST_TESTS_ENV`)."""


class Preflight(PreflightFindings):
    """What the test command does at the base commit (an event, `repair.preflight`, and the outcome's field)."""

    _result: ExecResult | None = PrivateAttr(default=None)

    @property
    def result(self) -> ExecResult | None:
        """The test command's run itself: a caller that needs the base commit's outcome need not run it again."""
        return self._result

    @property
    def can_run(self) -> bool:
        return self.cause is None

    @property
    def tests_fail(self) -> bool:
        """The tests ran and some failed: the bug shows (each candidate's tests can say how far it got)."""
        return self.can_run and self.exit_code not in (0, None)

    def summary(self) -> str:
        """One line: the outcome counts, what was fixed, the cause or the note."""
        counts = ", ".join(f"{v} {k}" for k, v in self.counts.items()) or "no test counts"
        parts = [f"the test command at the base commit: exit {self.exit_code} ({counts})"]
        if self.ran_tests is not None:
            parts.append(self.shortened_run())
        if self.fixed:
            parts.append("arranged: " + "; ".join(self.fixed))
        if self.left_out:
            parts.append("left out (an optional module the sandbox lacks): "
                         + ", ".join(f"{path} ({why})" for path, why in self.left_out.items()))
        if self.own_errors:
            parts.append("the repository's own code raises while the tests are collected, taken as the failing "
                         "behaviour: " + ", ".join(f"{path} ({why})" for path, why in self.own_errors.items()))
        if self.cause:
            parts.append(f"cannot run: {self.cause}")
        elif self.note:
            parts.append(self.note)
        return "; ".join(parts)

    def shortened_run(self) -> str:
        """What a run stopped at its time ran: `ran 1,200 of 5,739 tests (...): first tests/a.py, ...`."""
        stop = f"no test started after {self.stop_after_s:g}s" if self.stop_after_s is not None else "stopped"
        text = f"ran {self.ran_tests or 0:,} of {self.suite_tests or 0:,} tests ({stop}: the whole suite would not fit)"
        if self.first:
            shown = ", ".join(self.first[:4]) + (f" and {len(self.first) - 4} more" if len(self.first) > 4 else "")
            text += f", first the {len(self.first)} test files nearest the issue ({shown}), then the others in order"
        return text


def cannot_run(output: str, exit_code: int, is_pytest: bool) -> str | None:
    """Why a test run's output shows the tests could not run at all, or None when they ran."""
    if exit_code in (126, 127) or (exit_code != 0 and _NOT_FOUND.search(output) and not _COUNT.search(output)):
        found = _NOT_FOUND.search(output)
        return f"command not found: {found.group(1)}" if found else f"the command cannot be executed (exit {exit_code})"
    if not is_pytest:
        return None
    missing = _MISSING.search(output)
    collecting = _COLLECTING.search(output)
    if exit_code == 2 or collecting:  # pytest: interrupted, nearly always by errors during collection
        where = f" ({collecting.group(1)})" if collecting else ""
        if missing:
            return f"{missing.group(1)}{where}"
        return f"an error while collecting the tests{where}" if collecting else "pytest was interrupted (exit 2)"
    if exit_code == 4:
        usage = _USAGE.search(output)
        return "pytest usage error (exit 4): " + (usage.group(1) if usage else (output.strip().splitlines() or ["?"])[-1])[:200]
    if exit_code == 5:
        return "no tests were collected (exit 5)"
    return None


def fix_for(cause: str) -> str:
    """What the user can do about a cause `cannot_run` gave."""
    if cause.startswith("command not found"):
        return "give a --test-cmd the sandbox has (it has python3 and pytest; `python` runs python3)"
    if "No module named" in cause or cause.startswith("ImportError"):
        return ("if the module is a dependency of the tests, give its wheels: agentflow repair REPO --wheelhouse DIR "
                "(pip download --only-binary :all: -d DIR PACKAGE), or a task's `requirements` with a `wheelhouse`; "
                "if the repository should provide it, fix the import")
    if "unrecognized arguments" in cause:
        return ("the repository's pytest configuration uses a plugin the sandbox lacks (its options are unknown): "
                "give the plugin's wheels with --wheelhouse DIR (pip download --only-binary :all: -d DIR PLUGIN)")
    if "no tests were collected" in cause:
        return "point --test-cmd at the repository's tests (e.g. --test-cmd 'pytest -q tests')"
    return "run the test command in the repository to see the error, then fix it or give another --test-cmd"


_SECTION = re.compile(r"^_+ ERROR collecting (\S+) _+$", re.MULTILINE)
_SECTION_END = re.compile(r"^(?:_+ .+ _+|=+ .* =+)$", re.MULTILINE)
_FRAME = re.compile(r"^(\S+\.py):\d+: ", re.MULTILINE)
_ERROR_LINE = re.compile(r"^E\s+(\S.*)$", re.MULTILINE)
_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")
_CANNOT_IMPORT = re.compile(r"ImportError: cannot import name '[^']+' from '([^']+)'")
_TEST_PART = re.compile(r"(^|/)(tests?|testing)/|(^|/)(test_[^/]*|[^/]*_test|conftest)\.py$")
_LIST_TRACKED = "git ls-files --cached --others --exclude-standard -- '*.py'"


class RepoModules(BaseModel):
    """The repository's Python files, as names a traceback or an import error can be matched against."""

    files: frozenset[str]

    @property
    def package_files(self) -> frozenset[str]:
        """Its files that are not tests (nor test helpers or conftest files)."""
        return frozenset(f for f in self.files if not _TEST_PART.search(f))

    @property
    def own_names(self) -> frozenset[str]:
        """The top-level modules it provides (at its root or under src/)."""
        return frozenset(f.removeprefix("src/").split("/", 1)[0].removesuffix(".py")
                         for f in self.package_files)

    @property
    def any_names(self) -> frozenset[str]:
        """Every folder and module name anywhere in it (a test helper's included)."""
        return frozenset(part.removesuffix(".py") for path in self.files for part in path.split("/"))


class CollectionError(BaseModel):
    """One test file's collection error, classified."""

    path: str
    error: str
    kind: str
    """optional_module (left out), package_dependency (left out when the rest of the suite runs without the
    file, else a set-up failure), own_code (the bug, maybe) or setup (stop)."""


def read_collection_errors(output: str, repo: RepoModules) -> list[CollectionError]:
    """Each `ERROR collecting FILE` section of a pytest log, classified (see the module docstring)."""
    found = []
    for header in _SECTION.finditer(output):
        end = _SECTION_END.search(output, header.end())
        body = output[header.end():end.start() if end else len(output)]
        path = header.group(1)
        errors = _ERROR_LINE.findall(body)
        error = errors[-1].strip() if errors else "an error while collecting"
        frames = {f.removeprefix("./") for f in _FRAME.findall(body)}
        in_package = bool(frames & repo.package_files)
        missing = _NO_MODULE.search(error)
        named = missing or _CANNOT_IMPORT.search(error)
        top = named.group(1).split(".")[0] if named else None
        if missing and top not in repo.any_names:  # a module from outside: a dependency
            # Through the package's code it is a dependency of the package; only a second run without the file
            # tells one every test needs (set-up) from one a part of the package needs (optional).
            kind = "package_dependency" if in_package else "optional_module"
        elif top in repo.own_names or in_package:  # one of its own modules, or raised in its own code
            kind = "own_code"
        else:
            kind = "setup"
        found.append(CollectionError(path=path, error=error[:200], kind=kind))
    return found


def ignoring(env: Mapping[str, str] | None, files: list[str]) -> dict[str, str] | None:
    """`env` with pytest told to leave `files` out (added to any `PYTEST_ADDOPTS` it has); `env` when none."""
    if not files:
        return dict(env) if env else None
    out = dict(env or {})
    extra = " ".join(f"--ignore={shlex.quote(path)}" for path in files)
    out["PYTEST_ADDOPTS"] = f"{out['PYTEST_ADDOPTS']} {extra}" if out.get("PYTEST_ADDOPTS") else extra
    return out


async def run_preflight(sandbox: Sandbox, test_cmd: str, *, timeout: float,
                        env: Mapping[str, str] | None = None, stop_after_s: float | None = None,
                        first: Sequence[str] = ()) -> Preflight:
    """Run `test_cmd` in the workspace (at the base commit) with the test environment; classify the outcome.
    Collection errors are read per file: test files needing a missing optional module are left out and the
    suite runs again without them (in the time left); an error of the repository's own code is the failing
    behaviour. With `stop_after_s`, no test starts after that many seconds, `first` (test files) first."""
    started = time.monotonic()
    limit = _TimeLimit(stop_after_s=stop_after_s, first=list(first)) if stop_after_s is not None else None
    if limit is not None and first:
        await sandbox.write_file(FIRST_TESTS_PATH, "".join(f"{path}\n" for path in first))
    report = await _run_once(sandbox, test_cmd, timeout=timeout, env=env, limit=limit)
    if report.can_run or report.result is None or not _COLLECTING.search(report.result.output):
        return report
    listing = await sandbox.exec(sh_command(_LIST_TRACKED))
    repo = RepoModules(files=frozenset(listing.stdout.split()))
    errors = read_collection_errors(report.result.output, repo)
    if not errors or any(e.kind == "setup" for e in errors):
        return report
    left_out = {e.path: e.error for e in errors if e.kind in ("optional_module", "package_dependency")}
    own = {e.path: e.error for e in errors if e.kind == "own_code"}
    if left_out:
        spent = time.monotonic() - started
        again = await _run_once(sandbox, test_cmd, timeout=max(1.0, timeout - spent), env=ignoring(env, list(left_out)),
                                limit=limit.later(spent) if limit is not None else None)
        again.left_out = left_out
        again.seconds = round(time.monotonic() - started, 3)
        if not again.can_run and any(e.kind == "package_dependency" for e in errors):
            return report  # nothing runs without those files: the package needs the module (set-up)
        if not again.can_run or not own:
            return again
        report = again
    report.own_errors = own
    report.cause = report.fix = None
    report.note = "the tests fail at the base commit on an error of the repository's own code"
    return report


def can_stop(test_cmd: str) -> bool:
    """Whether a run of `test_cmd` can be given a time to stop at (it starts pytest through the runner script)."""
    return runner_command(test_cmd, EVAL_DIR) != test_cmd


class _TimeLimit(BaseModel):
    """When no test of a run is to start (seconds after its start), and the test files it starts with."""

    stop_after_s: float
    first: list[str]

    def later(self, spent_s: float) -> _TimeLimit:
        """The same limit for a run starting `spent_s` seconds after the first."""
        return self.model_copy(update={"stop_after_s": max(0.0, self.stop_after_s - spent_s)})

    def env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        return stop_env(env, self.stop_after_s, FIRST_TESTS_PATH if self.first else None)


async def _run_once(sandbox: Sandbox, test_cmd: str, *, timeout: float,
                    env: Mapping[str, str] | None, limit: _TimeLimit | None = None) -> Preflight:
    shim = (await sandbox.exec(sh_command(f"test -e {PYTHON_SHIM}"))).ok
    has_src = (await sandbox.exec(sh_command("test -d src"))).ok
    await install_runner(sandbox, EVAL_DIR)  # the same command as verification runs (its result may be reused)
    command = runner_command(test_cmd, EVAL_DIR)
    if not can_stop(test_cmd):  # only the runner script can stop a run at a time: this one runs to its timeout
        limit = None
    result = await sandbox.exec(sh_command(test_env(EVAL_DIR) + command),
                                env=(limit.env(env) if limit is not None else dict(env or {})) or None,
                                timeout=timeout)
    output = result.output
    is_pytest = "pytest" in test_cmd
    report = Preflight(command=test_cmd, exit_code=result.exit_code, timed_out=result.timed_out,
                       seconds=round(result.duration_s, 3))
    report._result = result
    if limit is not None:
        report.stop_after_s = round(limit.stop_after_s, 1)
        stopped = STOPPED_LINE.search(output)
        if stopped:
            report.ran_tests, report.suite_tests = int(stopped.group(1)), int(stopped.group(2))
            report.first = limit.first
    report.counts = {("errors" if k == "error" else k): int(v) for v, k in _COUNT.findall(output)}
    if shim:
        report.fixed.append("`python` runs python3 (the sandbox has no `python`)")
    if is_pytest and not re.match(r"\s*\S*python\S*\s+-m\s+pytest", test_cmd):
        report.fixed.append("the repository root is importable (the `pytest` script does not add it)")
    if has_src:
        report.fixed.append("src/ is importable (a src-layout package)")
    if result.timed_out:
        running = (f" (no test was to start after {round(limit.stop_after_s, 1):g}s: the one running then did not end)"
                   if limit is not None else "")
        report.cause = f"the tests did not finish within {timeout:.0f}s{running}"
        report.fix = "raise -c test_timeout_s=SECONDS or give a --test-cmd that runs fewer tests"
    elif (cause := cannot_run(output, result.exit_code, is_pytest)) is not None:
        report.cause, report.fix = cause, fix_for(cause)
    elif result.exit_code == 0:
        report.note = "every test passes: they cannot show the bug (a reproduction script is tried instead)"
    return report
