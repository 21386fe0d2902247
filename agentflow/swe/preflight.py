"""Pre-flight: can the repository's tests run at the base commit, in the sandbox, before any model is asked?

A repair verified by tests that cannot run (a collection error, a package the sandbox cannot import, a command
that is not there) reports every candidate, the right fix included, as failing. So the test command runs once
at the base commit, in the environment every later test run gets (`testrun.test_env`: the repository root and
`src/` importable, the task's requirements, a `python` on PATH), and its outcome is classified: the tests ran
(some fail: the bug; all pass: fine, but they cannot show the fix) or they cannot run (the cause, and the fix
the user has to make).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import BaseModel, Field, PrivateAttr

from agentflow.sandbox.base import ExecResult, Sandbox, sh_command
from agentflow.swe.testrun import install_runner, runner_command, test_env
from agentflow.swe.workspace import EVAL_DIR, PYTHON_SHIM

_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)\b")
_MISSING = re.compile(r"(ModuleNotFoundError: No module named '[^']+'|ImportError: [^\n]+)")
_COLLECTING = re.compile(r"_+ ERROR collecting (\S+) _+")
_USAGE = re.compile(r"^\S*: error: (.+)$", re.MULTILINE)
_NOT_FOUND = re.compile(r"(?:^|: )(\S+): (?:command )?not found", re.MULTILINE)


class Preflight(BaseModel):
    """What the test command does at the base commit (an event, `repair.preflight`, and the outcome's field)."""

    command: str
    exit_code: int | None = None
    timed_out: bool = False
    counts: dict[str, int] = Field(default_factory=dict)
    """pytest's summary counts (passed, failed, errors, skipped, ...)."""
    fixed: list[str] = Field(default_factory=list)
    """What the harness arranged so the tests can run, without the user (the `python` shim, `src/` importable)."""
    cause: str | None = None
    """Why the tests cannot run (None: they ran)."""
    fix: str | None = None
    """What the user can do about `cause`."""
    note: str | None = None
    """Worth knowing although the tests ran (every test passes: they cannot show the bug)."""
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
        if self.fixed:
            parts.append("arranged: " + "; ".join(self.fixed))
        if self.cause:
            parts.append(f"cannot run: {self.cause}")
        elif self.note:
            parts.append(self.note)
        return "; ".join(parts)


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


async def run_preflight(sandbox: Sandbox, test_cmd: str, *, timeout: float,
                        env: Mapping[str, str] | None = None) -> Preflight:
    """Run `test_cmd` in the workspace (at the base commit) with the test environment; classify the outcome."""
    shim = (await sandbox.exec(sh_command(f"test -e {PYTHON_SHIM}"))).ok
    has_src = (await sandbox.exec(sh_command("test -d src"))).ok
    await install_runner(sandbox, EVAL_DIR)  # the same command as verification runs (its result may be reused)
    result = await sandbox.exec(sh_command(test_env(EVAL_DIR) + runner_command(test_cmd, EVAL_DIR)),
                                env=dict(env or {}) or None,
                                timeout=timeout)
    output = result.output
    is_pytest = "pytest" in test_cmd
    report = Preflight(command=test_cmd, exit_code=result.exit_code, timed_out=result.timed_out)
    report._result = result
    report.counts = {("errors" if k == "error" else k): int(v) for v, k in _COUNT.findall(output)}
    if shim:
        report.fixed.append("`python` runs python3 (the sandbox has no `python`)")
    if is_pytest and not re.match(r"\s*\S*python\S*\s+-m\s+pytest", test_cmd):
        report.fixed.append("the repository root is importable (the `pytest` script does not add it)")
    if has_src:
        report.fixed.append("src/ is importable (a src-layout package)")
    if result.timed_out:
        report.cause = f"the tests did not finish within {timeout:.0f}s"
        report.fix = "raise -c test_timeout_s=SECONDS or give a --test-cmd that runs fewer tests"
    elif (cause := cannot_run(output, result.exit_code, is_pytest)) is not None:
        report.cause, report.fix = cause, fix_for(cause)
    elif result.exit_code == 0:
        report.note = "every test passes: they cannot show the bug (a reproduction script is tried instead)"
    return report
