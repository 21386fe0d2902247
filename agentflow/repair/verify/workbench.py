"""A task's sandbox at its base commit: reset, restore a patch, read sources, diff, verify.

Concurrent rollouts share one workbench: `async with bench.lock:` around anything that sets the workspace
to a state and reads from it (model calls happen outside the lock, so samples decode together). Letting go of
the lock ends every process started under it (`SandboxTurn`): a candidate's code cannot leave a background
job that rewrites the next candidate's files or tests.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import re
import shlex
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel

from agentflow.errors import AgentflowError
from agentflow.graph.search.workspace import SandboxTurn
from agentflow.pysyntax import parsed
from agentflow.repair.config import RepairConfig
from agentflow.repair.locate.lines import TargetFunction, line_targets, marks_summary, run_line_spectrum
from agentflow.repair.locate.localize import RunEvidence
from agentflow.repair.locate.spectrum import (
    TIMED_OUT,
    ExampleRun,
    FunctionIndex,
    gather_evidence,
    run_examples,
)
from agentflow.repair.locate.statement import read_statement
from agentflow.repair.verify.keepcheck import instrumented, passed_checks, passing_only, why_not_a_keep_check
from agentflow.repair.verify.targeting import (
    MAX_TARGETED_ARGS_CHARS,
    SuiteReach,
    changed_functions,
    estimate,
    targeted_command,
    timeout_from_base,
)
from agentflow.repair.verify.testshare import (
    FIT_MARGIN,
    Allowance,
    TestTimeShare,
    WallPlan,
    bounded,
    failing_ids,
    localization_selection,
    preflight_order,
)
from agentflow.sandbox.base import ExecResult, Sandbox, sh_command
from agentflow.swe.evaluate import run_prediction
from agentflow.swe.guard import restore_test_infra
from agentflow.swe.patch import apply_patch, strip_test_files, touched_in_place
from agentflow.swe.preflight import Preflight, can_stop, ignoring, run_preflight
from agentflow.swe.report import InstanceReport
from agentflow.swe.tasks import SWETask
from agentflow.swe.testrun import STOPPED_LINE, install_runner, runner_command, stop_env, test_env
from agentflow.swe.workspace import EVAL_DIR, GIT_FLAGS, seed_workspace

FeedbackMode = Literal["task", "repo", "none"]
REPRO_PATH = f"{EVAL_DIR}/reproduce_issue.py"
"""Where the reproduction script lives: inside the git-excluded scratch folder, so resets keep it and
patches never contain it."""
KEEP_PATH = f"{EVAL_DIR}/keeps_working.py"
"""Where the keep-working check runs (`install_keep_check`), beside the reproduction script."""


class Verification(BaseModel):
    passed: bool | None = None
    """True/False when the verifying tests decide the candidate; None when they cannot (blind mode: the
    repository's tests already pass at the base commit, so passing them proves only 'no regressions')."""
    score: float = 0.0
    """Value in [0, 1] used to rank candidates and guide the search."""
    kind: str = "none"
    """task_tests (the task's FAIL_TO_PASS/PASS_TO_PASS), test_cmd (the repository's tests) or none."""
    tests_status: dict[str, dict[str, list[str]]] | None = None
    exit_code: int | None = None
    reproduced: bool | None = None
    """Blind mode with a reproduction (a script, or the failing tests a report names): True when it still fails
    (the bug is still there)."""
    output: str = ""
    """Failure summary, the feedback of the next attempt."""
    counts: tuple[int, int] | None = None
    """Blind mode: (passed, run) as pytest's summary line says (the whole suite's estimate when `targeted`);
    None when it printed none."""
    targeted: int | None = None
    """Blind mode: the result is estimated from a run of this many tests, those reaching the functions the
    patch changes (`agentflow.repair.verify.targeting`); None when the whole suite ran."""
    seconds: float | None = None
    """How long its test run took."""
    shortened: bool = False
    """Blind mode: the run was cut to fit its allowance (`verify.testshare`: its timeout, the test-time share):
    the tests failing at the base commit, then those reaching the change; `targeted` says how many ran."""


@dataclass(frozen=True)
class HowToVerify:
    """What a verification depends on besides the patch, as the task's state holds it: the node that verifies
    passes it (`nodekit.how_to_verify`), so a resumed task, in a new sandbox, verifies as the killed one did."""

    base: Verification | None = None
    """The tests on the unchanged code: a candidate's test run may take a multiple of their time
    (`tests.timeout_ratio`); blind mode, when they passed, passing them again shows no regression
    only."""
    test_cmd: str | None = None
    """Agentflow's own command of the selected regression tests (`swe.regression`); None: the run's
    `test_cmd`, else the repository's whole suite."""
    reach: SuiteReach | None = None
    """Which tests reach which function at the base commit (`swe.spectrum`), for targeted test runs."""
    repro: str | None = None
    """A kept reproduction script (`swe.reproduce`): blind mode, it scores candidates too."""
    repro_tests: tuple[str, ...] = ()
    """The failing tests a failing-test report names, kept as the reproduction (`swe.reproduce`): blind mode,
    they run on every candidate, and the verification's feedback leads with their output."""

    def key(self) -> tuple[object, ...]:
        """What of it a verification's result depends on (a cached one is reused only when it is the same)."""
        base = (self.base.passed, self.base.seconds) if self.base is not None else None
        return self.test_cmd, self.repro, self.repro_tests, self.reach is not None, base


def failures_first(theirs: str, output: str) -> str:
    """A failing-test report's own tests' failures (`theirs`, summarised), then the rest of a run's output: the
    feedback is cut, and other tests may fail too. The run's lines that repeat theirs are left out (the run
    includes those tests: each failure would be shown twice, as `summarise_failures` shows no line twice)."""
    first = summarise_failures(theirs, 2000)
    shown = set(first.splitlines())
    rest = "\n".join(line for line in output.splitlines() if line not in shown or not line.strip()).strip()
    return first + ("\n\n" + rest if rest else "")


def summarise_failures(output: str, limit: int) -> str:
    """What a failing pytest log says, as the next attempt's feedback: each failure's name, the lines pytest
    marks (`>`), the values it shows (`expected = '...'`), its `E` lines and file:line locations, and the short
    summary's FAILED/ERROR lines. The tests' own source and captured output are left out: shown a failing
    test's code, a small model often gives back that test instead of the rewrite."""
    keep = []
    section: str | None = None
    for line in output.splitlines():
        s = line.strip()
        header = re.match(r"^_{3,} (.+?) _{3,}$", s)
        if header:
            section = "failure"
            keep.append(f"{header.group(1)}:")
            continue
        if re.match(r"^-{3,} .+ -{3,}$", s):
            section = "captured"  # the test's printed output, which repeats the values shown above
            continue
        if s.startswith("=" * 5):
            section = None
            continue
        if section == "captured":
            continue
        located = bool(re.search(r"\.py:\d+", s))
        if section == "failure":
            shown_value = bool(line) and not line[0].isspace() and not re.fullmatch(r"(_ )+_?", s)
            if s.startswith((">", "E ")) or located or shown_value:
                keep.append(line.rstrip())
        elif s.startswith(("E ", "FAILED", "ERROR")) or located:
            keep.append(line.rstrip())
    text = "\n".join(dict.fromkeys(keep)) or output.strip()[-limit:]
    return text if len(text) <= limit else text[:limit] + "\n..."


def _exception_name(output: str) -> str | None:
    """The type of the exception a traceback ends with (`KeyError`, `pkg.errors.ConversionError`,
    `pkg.routing.NotFound`): the first line at column 0 after the last frame."""
    lines = output.strip().splitlines()
    last_frame = max((i for i, line in enumerate(lines) if line.lstrip().startswith('File "')), default=None)
    if last_frame is None:
        return None
    for line in lines[last_frame + 1 :]:
        if line[:1].isspace() or not line.strip():
            continue  # the frame's code line and its carets
        match = re.match(r"([A-Za-z_][\w.]*)(?::|$)", line)
        return match.group(1) if match else None
    return None


_REPORTED = re.compile(r"(?<![\w.])(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Warning)):[ \t]+\S")


def reported_exceptions(issue: str) -> set[str]:
    """Exceptions the issue shows as raised, in a traceback's last-line form (`KeyError: 'maybe'`,
    `ZeroDivisionError: division by zero`); an `except Name:` line or a name in prose is not such a report."""
    return set(_REPORTED.findall(issue))


_CODE = re.compile(r"```[^\n]*\n(.*?)```|`([^`\n]+)`", re.DOTALL)
_QUOTED = re.compile(r"'([^'\n]+)'|\"([^\"\n]+)\"")


def issue_values(issue: str) -> set[str]:
    """The string values the issue's code shows (quoted, in code blocks and `inline code`): the case it reports."""
    code = "\n".join(a or b for a, b in _CODE.findall(issue))
    return {a or b for a, b in _QUOTED.findall(code)}


def why_not_the_reported_case(script: str, issue: str) -> str | None:
    """None when a reproduction script runs the issue's own case: it uses one of the string values the issue's
    code shows (exactly, or one of three characters or more inside a longer string), or the issue shows none.
    Scripts that copy a repository test's fixture instead fail for a reason the issue is not about, and steer
    every later sample to it."""
    values = issue_values(issue)
    if not values:
        return None
    if (tree := parsed(script)) is None:
        return None  # running it says what is wrong
    used = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    if values & used or any(len(v) >= 3 and v in u for v in values for u in used):
        return None
    shown = ", ".join(repr(v) for v in sorted(values, key=len, reverse=True)[:4])
    return f"the script uses none of the values the issue shows ({shown}): reproduce the issue's own case"


def why_not_a_bug(output: str, issue: str) -> str | None:
    """None when a reproduction script failed the way the bug does: its own assertion failed, or it raised,
    inside the repository's code, an exception the issue names; when the issue shows errors as raised
    (`reported_exceptions`), the exception must be one of those, and a failed assertion must show one. Otherwise
    why the failure does not count: the script's own mistakes (syntax, imports, an error raised in the script
    itself), an exception the issue does not mention (usually the script calling the API wrongly), or one it
    names only as what should happen."""
    if re.search(r"\b(SyntaxError|IndentationError|ModuleNotFoundError|ImportError)\b", output):
        return "the script itself is broken (syntax or import error)"
    frames = re.findall(r'File "([^"]+)", line \d+', output)
    if not frames:
        return "it did not end with a traceback"
    name = _exception_name(output) or ""
    short, reported = name.rsplit(".", 1)[-1], reported_exceptions(issue)
    if short == "AssertionError":
        if reported and not any(re.search(rf"\b{re.escape(r)}\b", output) for r in reported):
            # the issue reports an error raised; a kept script asserting something else (false by design) fails
            # on every candidate, the fix included, and then tells the vote nothing about the fix
            return (f"it failed an assertion, but the issue reports {' or '.join(sorted(reported))} raised: make the "
                    "script run the case that raises it")
        return None
    if frames[-1].endswith(REPRO_PATH.rsplit("/", 1)[-1]):
        return f"the {name or 'error'} was raised in the script itself, not in the package"
    if name and re.search(rf"\b{re.escape(short)}\b", issue):
        if reported and short not in reported:
            # the issue names one error as the bug and another as what should happen instead; a script that
            # fails with the latter reproduces a different case and leads every sample to the wrong function
            return (f"it failed with {short}, but the error the issue reports is {' or '.join(sorted(reported))} "
                    f"({short} is probably what the issue expects instead): make the script run the case the issue "
                    "reports")
        return None
    return (f"it failed with {name or 'an error'}, which the issue does not describe: the script probably uses "
            "the package wrongly (check the signatures above); make the script assert the behaviour the issue "
            "expects")


def _counts(output: str) -> tuple[int, int]:
    """(passed, total) from pytest's summary line."""
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|error|errors)", output)}
    good = counts.get("passed", 0)
    return good, good + counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0)


def stopped_after(result: ExecResult) -> int | None:
    """How many tests a run stopped at its time ran (the runner's line); None: it was not stopped so."""
    found = STOPPED_LINE.search(result.output)
    return int(found.group(1)) if found is not None else None


def _missed_tests(result: ExecResult, named: int) -> bool:
    """Whether a run of `named` tests by id did not run them all: pytest found no such test (usage error, exit
    4) or none ran (exit 5), or its summary counts fewer (one was skipped this time). The whole suite then runs
    instead. A timeout, a collection error (exit 2: the base collected) or a stop at its time is the candidate's
    own result."""
    if result.timed_out or stopped_after(result) is not None:
        return False
    if result.exit_code in (4, 5):
        return True
    return result.exit_code in (0, 1) and _counts(result.output)[1] < named


@dataclass(frozen=True)
class _Shortened:
    """A test run cut to fit its allowance: its command, how many tests, their indexes in the suite's reach."""

    command: str
    tests: int
    indexes: list[int] | None
    """None: not every test is one the traced run saw (the result is the run's own, not an estimate)."""


TRACE_SLOWDOWN = 2.0
"""The call-traced suite run is expected to take this multiple of the plain run (the tracer's overhead)."""
LINE_TRACE_SLOWDOWN = 2.5
"""The line-traced run (call events everywhere, line events in a few functions) is expected to take this
multiple of the plain run."""
_LIST_PYTHON = "git ls-files --cached --others --exclude-standard -- '*.py'"


@dataclass
class CandidateTestTime:
    """Seconds of test runs on candidates over one task: their sum and the longest single run."""

    total_s: float = 0.0
    longest_s: float = 0.0

    def add(self, seconds: float) -> None:
        self.total_s += seconds
        self.longest_s = max(self.longest_s, seconds)


MAX_LINE_TESTS = 300
"""Passing tests the line-traced run takes at most (those reaching the traced functions, in the suite's order)."""


def line_tests(reach: SuiteReach, targets: Sequence[TargetFunction]) -> tuple[list[str], list[str]]:
    """(the tests that failed, the passing tests that reach a target, in the suite's order, at most
    `MAX_LINE_TESTS`) of the function-level run: what the line-traced run compares."""
    wanted = {(t.path, t.qualname) for t in targets}
    reaching: set[int] = set()
    for function, tests in reach.functions.items():
        if function in wanted:
            reaching |= tests
    failing = [reach.ids[i] for i in sorted(reach.failed)]
    passing = [reach.ids[i] for i in sorted(reaching - reach.failed)]
    return failing, passing[:MAX_LINE_TESTS]


class Workbench:
    """One task's sandbox, shared by every rollout of its search (see the module docstring)."""

    def __init__(self, sandbox: Sandbox, task: SWETask, cfg: RepairConfig, python: str, *,
                 plan: WallPlan | None = None) -> None:
        self.sandbox, self.task, self.cfg, self.python = sandbox, task, cfg, python
        self.head = "HEAD"
        self.local = sandbox.info().backend == "local"
        mode = cfg.tests.feedback
        if mode == "auto":
            mode = "task" if task.FAIL_TO_PASS else "repo"
        self.mode: FeedbackMode = mode
        self.lock = SandboxTurn(sandbox)
        """Held by a rollout while it sets the workspace and runs in it; its processes end as it lets go."""
        self._verified: dict[tuple[object, ...], Verification] = {}
        """Verifications by what they depend on and patch: samples that agree on a patch run the suite once."""
        self.test_time = CandidateTestTime()
        """Test runs on candidates (not the base commit's), for the record (`InstanceOutcome`); one tally for
        every view of this workbench (`on`), so a search branch's runs count too."""
        wall = cfg.limits.wall_time_s
        self.test_share = (TestTimeShare(share=cfg.tests.time_share, plan=plan) if plan is not None else
                           TestTimeShare(limit_s=cfg.tests.time_share * wall if wall else None,
                                         share=cfg.tests.time_share if wall else None))
        """The test-time budget every test run goes through: what the pre-flight, the localization run, the
        candidates' verifications and a finalist's check may still spend (`tests.time_share` of the task's
        expected wall time, re-planned at every step by `plan`; without one, of the wall limit), the base run's
        pace; one for every view of this workbench."""
        self.failing_at_base: list[str] = []
        """The test ids that failed in the pre-flight's run: what a shortened run keeps."""
        self.left_out: list[str] = []
        """Test files the pre-flight found cannot be collected for a missing optional module: left out of every
        test run (`swe.preflight.ignoring`)."""
        self._base_runs: dict[str, ExecResult] = {}
        """The pre-flight's run of a test command at the base commit, taken by the first base verification
        with that command instead of a second run of the same suite on the same code."""
        self._base_ran: int | None = None
        """How many tests the pre-flight's run held when it stopped at its time (None: the whole suite ran)."""

    async def setup(self) -> None:
        self.head = (await seed_workspace(self.sandbox, self.task, python=self.python)) or "HEAD"

    async def reset(self) -> None:
        script = f"git {GIT_FLAGS} reset -q --hard {shlex.quote(self.head)} && git {GIT_FLAGS} clean -fdq -e {EVAL_DIR}"
        result = await self.sandbox.exec(sh_command(script))
        if not result.ok:
            raise AgentflowError(f"resetting the workspace failed: {result.output.strip()[-300:]}")

    async def restore(self, patch: str) -> None:
        await self.reset()
        if patch.strip():
            applied = await apply_patch(self.sandbox, patch)
            if not applied.applied:
                raise AgentflowError(f"a candidate patch no longer applies: {applied.log[-300:]}")

    @contextlib.asynccontextmanager
    async def at(self, patch: str) -> AsyncIterator[None]:
        """The workspace at base + `patch` under the lock, reset to the base commit when done."""
        async with self.lock:
            await self.restore(patch)
            try:
                yield
            finally:
                await self.reset()

    async def python_sources(self) -> dict[str, str]:
        # the pathspec quoted: a shell glob would expand `*.py` to the top folder's own files (setup.py, a
        # top-level test module) and hide every package below it
        listing = await self.sandbox.exec(sh_command(_LIST_PYTHON))
        out: dict[str, str] = {}
        for path in listing.stdout.split():
            if path.startswith(EVAL_DIR):
                continue
            with contextlib.suppress(Exception):  # an unreadable file is just not shown
                out[path] = await self.sandbox.read_file(path)
        return out

    async def diff(self) -> tuple[str, list[str]]:
        script = (
            # the scratch folder is git-excluded, so `add -A .` leaves it out (naming it in a pathspec fails)
            f"git add -A . >/dev/null 2>&1 && git -c core.quotepath=off diff --cached "
            f"--no-color --no-ext-diff {shlex.quote(self.head)}; s=$?; git reset -q >/dev/null 2>&1; exit $s"
        )
        result = await self.sandbox.exec(sh_command(script))
        if not result.ok:
            raise AgentflowError(f"git diff failed: {result.output.strip()[-300:]}")
        return strip_test_files(result.stdout)

    async def verify_files(self, parent_patch: str, files: Mapping[str, str], how: HowToVerify
                           ) -> tuple[str, list[str], Verification, float] | None:
        """Write `files` over base + `parent_patch`, take the patch and verify it as `how` says: (patch, dropped
        test files, verification, start time); None when the patch is the parent's (only test files changed).
        The caller holds the lock when the sandbox is shared."""
        started = time.monotonic()  # after the caller's lock: the attempt's own time, for its trace span
        await self.restore(parent_patch)
        for path, content in files.items():
            await self.sandbox.write_file(path, content)
        patch, dropped = await self.diff()
        if patch.strip() == parent_patch.strip():
            return None
        verification, _ = await self.verify(patch, how)
        return patch, dropped, verification, started

    def on(self, sandbox: Sandbox) -> Workbench:
        """This workbench over another view of its sandbox (a search branch's own workspace): the same task,
        settings, cache of verifications and test-time tally; a lock of its own."""
        view = copy.copy(self)
        view.sandbox, view.lock = sandbox, SandboxTurn(sandbox)
        return view

    def _test_env(self, how: HowToVerify | None = None) -> dict[str, str] | None:
        # agentflow's own command (the default, or the selected regression tests') runs without the plugins the
        # local environment has installed; a command the user gave may need them
        ours = self.cfg.tests.cmd is None or (how is not None and how.test_cmd is not None)
        env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"} if self.local and ours else None
        # the test files the pre-flight left out (an optional module they import is missing): every run skips them
        return ignoring(env, self.left_out)

    # ------------------------------------------------------------------------------------- reproduction

    async def run_script(self, path: str, how: HowToVerify | None = None) -> ExecResult:
        """A script of the scratch folder run on the current workspace, in the tests' environment: every script
        the repair runs (a reproduction, a keep-working check, a model-written test) goes through here."""
        # the repository root on the path, as pytest has it (the script itself lives in the scratch folder)
        script = f"{test_env(EVAL_DIR)}{self.python} {shlex.quote(path)}"
        return await self.sandbox.exec(sh_command(script), env=self._test_env(how),
                                       timeout=min(60.0, self.cfg.tests.timeout_s))

    async def run_repro(self, script: str, how: HowToVerify | None = None) -> tuple[bool, str]:
        """(still failing, output) of the reproduction `script` on the current workspace."""
        # written each time: the workspace may be a new sandbox (a resumed task) or a branch's fork
        await self.sandbox.write_file(REPRO_PATH, script)
        result = await self.run_script(REPRO_PATH, how)
        return (not result.ok), result.output

    async def install_repro(self, script: str) -> tuple[bool, str]:
        """Try a reproduction script at the base commit: it is kept only if it fails there the way the bug does
        (`why_not_a_bug`) on the issue's own case (`why_not_the_reported_case`). (kept, output; a script not kept
        has the reason appended to its output.) A kept script is the state's (`reproduction`), and verifications
        run it from there (`HowToVerify.repro`)."""
        await self.reset()
        failing, output = await self.run_repro(script)
        issue = f"{self.task.problem_statement}\n{self.task.hints_text or ''}"  # hints may name the exception
        reasons = (why_not_a_bug(output, issue) if failing else "it ran without error",
                   why_not_the_reported_case(script, issue))
        why = "; ".join(r for r in reasons if r) or None  # all of them: the retry is shown what to mend
        return why is None, output if why is None else f"{output.rstrip()}\n(not counted: {why})"

    async def run_repro_tests(self, tests: Sequence[str], how: HowToVerify, *, at_base: bool) -> tuple[bool, str] | None:
        """(still failing, output) of the failing tests a report names, run by their ids on the current workspace
        (a candidate's run draws on the test-time share); None when the test command cannot be narrowed to them
        or pytest did not run them all."""
        # the run's own command, not `how`'s: a selection of regression tests names tests, and cannot be narrowed
        cmd = targeted_command(self.test_command(), list(tests))
        if cmd is None:
            return None
        await install_runner(self.sandbox, EVAL_DIR)
        result = await self._run_tests(cmd, how, at_base=at_base, shared=not at_base, step="reproduction")
        return None if _missed_tests(result, len(tests)) else (not result.ok, result.output)

    async def install_repro_tests(self, tests: Sequence[str]) -> tuple[bool, str]:
        """Try the failing tests a report names as the reproduction at the base commit: kept when they all ran
        and fail there. (kept, output; the reason appended to the output of tests not kept.)"""
        async with self.at(""):
            found = await self.run_repro_tests(tests, HowToVerify(), at_base=True)
        if found is None:
            return False, f"(not counted: the test command cannot run {', '.join(tests)} by id, or pytest did not find them)"
        failing, output = found
        return failing, output if failing else f"{output.rstrip()}\n(not counted: they pass on the unchanged code)"

    async def install_keep_check(self, script: str, sources: Mapping[str, str]) -> tuple[str | None, str]:
        """A keep-working check (a script asserting what the fix must not change) cut down to the checks that
        pass at the base commit (`agentflow.repair.verify.keepcheck`), then run whole there to make sure. (the check
        as kept or None, output; when None the reason is appended to the output.) The workspace is reset."""
        why = why_not_a_keep_check(script, sources)
        if why is not None:
            return None, f"(not counted: {why})"
        async with self.at(""):
            await self.sandbox.write_file(KEEP_PATH, instrumented(script))
            output = (await self.run_script(KEEP_PATH)).output
            kept = passing_only(script, passed_checks(output))
            if kept is None:
                return None, f"{output.rstrip()}\n(not counted: none of its checks passes on the unchanged code)"
            await self.sandbox.write_file(KEEP_PATH, kept)
            result = await self.run_script(KEEP_PATH)
        ok, output = result.ok, result.output
        if not ok:
            return None, f"{output.rstrip()}\n(not counted: its checks that pass alone fail together)"
        return kept, output

    async def keeps_working(self, patch: str, check: str) -> bool:
        """Whether the keep-working `check` passes on base + `patch` (read as data: it only ever orders
        candidates the tests rank equal); the workspace is reset afterwards."""
        async with self.at(patch):
            await self.sandbox.write_file(KEEP_PATH, check)
            return (await self.run_script(KEEP_PATH)).ok

    async def gather_evidence(self, issue: str, sources: Mapping[str, str], *, test_timeout_s: float,
                              how: HowToVerify = HowToVerify()) -> tuple[RunEvidence, dict[str, Any]]:
        """Run the issue's examples and the repository's suite (`how`'s command) call-traced at the base commit
        (`agentflow.repair.locate.spectrum.gather_evidence`; a shortened run keeps the failing tests the statement
        names and those failing at the base first); the workspace is reset afterwards. The summary's `reach`
        is what targeted test runs go by (`HowToVerify.reach`)."""
        cmd = self.test_command(how)
        allowance = self.test_share.allow(test_timeout_s, self.cfg.tests.timeout_floor_s, slowdown=TRACE_SLOWDOWN)
        shortened: list[int] = []
        # the failing tests the statement names come first: the traced run must include them
        failing = [*read_statement(issue).tests_in(sources), *self.failing_at_base]

        def narrow(examples: ExampleRun) -> str | None:
            """The traced run cut to what fits the allowance: the failing tests, then those nearest the suspects."""
            if allowance.tests is None:
                return None
            suspects = [path for path, _ in examples.called]
            args, count = localization_selection(failing, suspects, sources, allowance.tests)
            narrowed = targeted_command(cmd, args) if args else None
            if narrowed is not None:
                shortened.append(count)
                self.test_share.shortened("localization", count, self.test_share.base_tests, allowance)
            return narrowed

        # reset afterwards: whatever the examples or the tests wrote is not part of any candidate
        async with self.at(""):
            started = time.monotonic()
            # no test starts after the planned part of the allowance: a traced run slower than its estimate (the
            # tracer's cost varies with the code the tests run) ends on the tests that ran, with their spectrum;
            # the failing tests' files first, then those nearest the issue
            first = [*(test.split("::", 1)[0] for test in failing), *preflight_order(issue, sources)]
            found = await gather_evidence(self.sandbox, self.python, issue, sources, test_cmd=cmd,
                                          test_timeout_s=allowance.timeout_s, env=self._test_env(how), narrow=narrow,
                                          stop_after_s=FIT_MARGIN * allowance.timeout_s,
                                          first=list(dict.fromkeys(first)))
        self.test_share.spend(time.monotonic() - started)
        if found[1].get("stopped"):
            ran, _ = found[1]["stopped"]
            self.test_share.shortened("localization", ran, self.test_share.base_tests, allowance)
        if any(TIMED_OUT in problem for problem in found[1]["problems"]):
            self.test_share.timed_out("localization", allowance.timeout_s, shortened=bool(shortened))
        if shortened:
            found[1]["shortened"] = shortened[0]
        return found

    async def line_evidence(self, issue: str, sources: Mapping[str, str], summary: Mapping[str, Any], *,
                            functions: int, test_timeout_s: float, how: HowToVerify = HowToVerify()) -> dict[str, Any]:
        """A line spectrum of the `functions` most suspect functions of the function-level run's `summary`
        (`agentflow.repair.locate.lines`): the issue's examples and a targeted run of the failing tests and the
        passing tests that reach those functions, fitted to the test-time budget as the localization's run is
        (its passing tests cut to what fits, the run skipped when not one of them fits; either is reported);
        the workspace is reset afterwards. Plain JSON (the state's `spectrum.lines`)."""
        targets = line_targets(summary.get("suspicion") or [], sources, functions)
        if not targets:
            return marks_summary([], 0, None, [], ["no suspect function to trace"])
        reach = SuiteReach.from_json(summary.get("reach"))
        if reach is None:  # which tests reach the suspects is not known: no passing test to compare with
            return marks_summary(targets, 0, None, [], ["no line-traced test run: the suite's run recorded no test ids"])
        failing, passing = line_tests(reach, targets)
        allowance = self.test_share.allow(test_timeout_s, self.cfg.tests.timeout_floor_s,
                                          slowdown=LINE_TRACE_SLOWDOWN, tests=len(failing) + len(passing))
        cmd, problem = self._line_command(self.test_command(how), failing, passing, allowance, reach.ids)
        if cmd is None:  # without passing tests to compare with, no line stands out: the examples need not run
            return marks_summary(targets, 0, None, [], [problem])
        async with self.at(""):
            started = time.monotonic()
            found = await run_line_spectrum(self.sandbox, self.python, issue, sources, targets, test_cmd=cmd,
                                            failing=failing, timeout_s=allowance.timeout_s, env=self._test_env(how))
        self.test_share.spend(time.monotonic() - started)
        if any(TIMED_OUT in p for p in found["problems"]):
            self.test_share.timed_out("line spectrum", allowance.timeout_s, shortened=allowance.tests is not None)
        found["problems"] = [problem, *found["problems"]] if problem else found["problems"]
        return found

    def _line_command(self, cmd: str, failing: list[str], passing: list[str], allowance: Allowance,
                      suite_order: Sequence[str]) -> tuple[str | None, str]:
        """The line-traced run's command (None: no run) and why it is shortened or not run ("": neither): its
        tests fitted to `allowance` (`TestTimeShare.fit_comparison`), in the order the suite ran them (a test
        may depend on state an earlier one left). Without a passing test no line is rarer than another among
        them, so there is no run."""
        if not passing:
            return None, "no line-traced test run: no passing test reaches the suspects"
        tests = self.test_share.fit_comparison("line spectrum", failing, passing, allowance)
        if tests is None:
            return None, "no line-traced test run: not one passing test fits the test time"
        position = {test: i for i, test in enumerate(suite_order)}
        narrowed = targeted_command(cmd, sorted(tests, key=lambda test: position.get(test, len(position))))
        if narrowed is None:
            return None, "no line-traced test run: the test command cannot name tests"
        shortened = len(tests) < len(failing) + len(passing)
        return narrowed, f"line-traced run shortened to {len(tests)} tests to fit the test time" if shortened else ""

    async def show_examples(self, patch: str, issue: str, sources: Mapping[str, str]) -> ExampleRun:
        """What the report's examples show on base + `patch` (`spectrum.run_examples`, its `shown`); the
        workspace is reset afterwards. Read as data: it only ever decides which candidate is compared first."""
        async with self.at(patch):
            return await run_examples(self.sandbox, self.python, issue, FunctionIndex(sources),
                                      timeout_s=min(60.0, self.cfg.tests.timeout_s))

    # ------------------------------------------------------------------------------------- verification

    async def verify_base(self, how: HowToVerify = HowToVerify()) -> Verification:
        """The unchanged code's verification as `how` says (by default: the task's tests alone, before any node
        found more)."""
        verification, _ = await self.verify("", how)
        return verification

    async def verify(self, patch: str, how: HowToVerify, *, final: bool = False, whole: bool = False
                     ) -> tuple[Verification, InstanceReport | None]:
        """Run the verifying tests on base + patch as `how` says (the workspace is left at base + patch).
        `final` runs the task's own tests when it has them (the report), whatever the feedback mode, and
        otherwise the whole suite, as does `whole` (a candidate's run may be of the tests reaching its change
        only, see `tests.targeted`). The same tests on the same code run once: a patch already
        verified the same way is not run again, except for the report."""
        graded = self.mode == "task" or (final and bool(self.task.FAIL_TO_PASS))
        whole = (whole or final) and not graded
        key = (*how.key(), whole, patch.strip())
        if not (final and graded) and key in self._verified:
            await self.restore(patch)
            return self._verified[key].model_copy(deep=True), None
        verification, report = await self._verify(patch, how, final=final, whole=whole)
        # a whole-suite run shortened to fit the test-time share is no whole-suite result (the report runs again)
        if not (final and graded) and not (whole and verification.shortened):
            self._verified[key] = verification.model_copy(deep=True)
            if verification.targeted is None and not whole:  # it ran whole: that is its whole-suite result too
                self._verified[(*how.key(), True, patch.strip())] = verification.model_copy(deep=True)
        return verification, report

    async def verify_whole(self, patch: str, how: HowToVerify) -> Verification:
        """The whole suite's verification of base + patch (a finalist's, when its own was estimated from the
        tests reaching its change); the workspace is reset afterwards."""
        async with self.lock:
            try:
                verification, _ = await self.verify(patch, how, whole=True)
            finally:
                await self.reset()
        return verification

    async def _verify(self, patch: str, how: HowToVerify, *, final: bool, whole: bool
                      ) -> tuple[Verification, InstanceReport | None]:
        if self.mode == "task" or (final and self.task.FAIL_TO_PASS):
            await self.reset()
            logs: dict[str, str] = {}
            started = time.monotonic()
            shared = bool(patch.strip()) and not final  # a candidate's run during the search
            timeout = self.cfg.tests.timeout_s if not shared else self.test_share.timeout(
                self.candidate_timeout(how), self.cfg.tests.timeout_floor_s)
            report = await run_prediction(
                self.sandbox,
                self.task,
                patch or None,
                python=self.python,
                test_timeout_s=timeout,
                rerun_failed=final,
                seed=False,
                run_empty=True,
                logs=logs,
            )
            status = report.tests_status
            total = sum(len(v) for part in status.values() for v in part.values())
            ok = len(status["FAIL_TO_PASS"]["success"]) + len(status["PASS_TO_PASS"]["success"])
            output = report.error or summarise_failures(logs.get("tests", ""), 4000)
            verification = Verification(
                passed=report.resolved,
                score=ok / total if total else 0.0,
                kind="task_tests",
                tests_status=status,
                output=output,
                seconds=round(time.monotonic() - started, 3),
            )
            if shared:
                self.test_time.add(verification.seconds or 0.0)
                self.test_share.spend(verification.seconds or 0.0)
            if report.error and "timed out" in report.error:
                self.test_share.timed_out("verification" if shared else "final" if final else "base", timeout,
                                          shortened=False)
            await self.restore(patch)
            return verification, report
        await self.restore(patch)
        if self.mode == "repo":
            # only a candidate's library code is verified: its pytest.ini, conftest.py, sitecustomize.py or
            # plugin must not decide it (swe/guard.py's allowlist)
            await restore_test_infra(self.sandbox, patch, base=self.head, test_cmd=how.test_cmd or self.cfg.tests.cmd,
                                     plugins=self.task.pytest_plugins)
            return await self._verify_repo(patch, how, whole=whole, final=final), None
        return Verification(kind="none"), None

    def test_command(self, how: HowToVerify | None = None) -> str:
        """The command that runs the repository's own tests (blind mode's verification): `how`'s selected
        tests, else the run's `test_cmd`, else the whole suite."""
        chosen = how.test_cmd if how is not None else None
        return chosen or self.cfg.tests.cmd or f"{self.python} -m pytest -q -p no:cacheprovider"

    async def preflight(self) -> Preflight:
        """Whether the command verifying candidates in blind mode can run at the base commit (`swe.preflight`),
        within its part of the test-time share (`TestTimeShare.preflight_timeout`): no test starts after
        `FIT_MARGIN` of it, the test files nearest the issue first (`preflight_order`). A run stopped so, or
        timed out, is reported (`TestTimeShare.report`)."""
        cmd = self.test_command()
        # a run that cannot stop itself at a time keeps its own timeout: a cut one would time out, not shorten
        timeout = (self.test_share.preflight_timeout(self.cfg.tests.timeout_s, self.cfg.tests.timeout_floor_s)
                   if can_stop(cmd) else self.cfg.tests.timeout_s)
        async with self.at(""):
            first = preflight_order(self.task.problem_statement, await self.python_sources())
            self.left_out = []
            found = await run_preflight(self.sandbox, cmd, timeout=timeout, env=self._test_env(),
                                        stop_after_s=FIT_MARGIN * timeout, first=first)
        self.left_out = list(found.left_out) if found.can_run else []
        self.test_share.spend(found.seconds or 0.0)
        if found.result is not None:
            self.failing_at_base = failing_ids(found.result.output)
            if found.can_run:  # the pace every later run's allowance is planned at
                self.test_share.measured(found.result.duration_s, found.suite_tests or sum(found.counts.values()),
                                         ran=found.ran_tests)
                self._base_runs[found.command] = found.result
                self._base_ran = found.ran_tests
        if found.ran_tests is not None:
            self.test_share.shortened("preflight", found.ran_tests, found.suite_tests,
                                      Allowance(timeout, found.ran_tests, self.test_share.base_s))
        if found.timed_out:
            self.test_share.timed_out("preflight", timeout, shortened=False)  # its cause says when it was to stop
        return found

    def candidate_timeout(self, how: HowToVerify) -> float:
        """A candidate's test run's limit: a multiple of the unchanged code's (`tests.timeout_ratio`)."""
        return timeout_from_base(how.base.seconds if how.base else None, ratio=self.cfg.tests.timeout_ratio,
                                 floor_s=self.cfg.tests.timeout_floor_s, ceiling_s=self.cfg.tests.timeout_s)

    async def base_files(self, paths: list[str]) -> dict[str, str | None]:
        """The base commit's text of `paths` (None for one it does not hold or that cannot be read), read from git
        whatever the workspace holds, each through a scratch file: a command's output is cut when long."""
        out: dict[str, str | None] = {}
        copy_path = f"{EVAL_DIR}/base_file"
        for path in dict.fromkeys(paths):
            spec = shlex.quote(f"{self.head}:{path}")
            shown = await self.sandbox.exec(sh_command(f"git {GIT_FLAGS} show {spec} > {copy_path}"))
            out[path] = None
            if shown.ok:
                with contextlib.suppress(AgentflowError, OSError, ValueError):  # unreadable: nothing to compare
                    out[path] = await self.sandbox.read_file(copy_path)
        return out

    async def _targets(self, patch: str, cmd: str, reach: SuiteReach | None) -> tuple[str, list[int]] | None:
        """The command running only the tests that `reach` says reach what `patch` changes, and their indexes;
        None when the whole suite must run (see `agentflow.repair.verify.targeting`)."""
        if not (self.cfg.tests.targeted and reach is not None and patch.strip()):
            return None
        paths = touched_in_place(patch)
        if not paths or not all(path.endswith(".py") for path in paths):
            return None  # a file added, removed or not Python: any test may see it
        sources = {path: text for path, text in (await self.base_files(paths)).items() if text is not None}
        changed = changed_functions(patch, sources)
        if changed is None:
            return None
        # with the tests that failed at the base: they show the bug, whatever path the trace saw them take
        targets = sorted(set(reach.tests_for(changed)) | reach.failed)
        if not targets or len(targets) >= len(reach.ids):
            return None
        narrowed = targeted_command(cmd, [reach.ids[i] for i in targets])
        return (narrowed, targets) if narrowed is not None else None

    async def _run_tests(self, cmd: str, how: HowToVerify, *, at_base: bool, allowance: Allowance | None = None,
                         shared: bool = False, step: str = "verification", shortened: bool = False) -> ExecResult:
        """One run of `cmd` within `allowance` (the base commit's: `test_timeout_s`); `shared`: a candidate's
        verification during the search, drawing on the test-time share. A `shortened` run (planned to fit
        `FIT_MARGIN` of its timeout at the base run's pace) starts no test after that: a candidate slower than
        the base ends on the tests that ran (`stopped_after`), reported, instead of timing out. A timeout is
        reported, whatever the run."""
        timeout = allowance.timeout_s if allowance is not None else self.cfg.tests.timeout_s
        env = self._test_env(how)
        if shortened and can_stop(cmd):
            env = stop_env(env, FIT_MARGIN * timeout)
        result = await self.sandbox.exec(sh_command(test_env(EVAL_DIR) + runner_command(cmd, EVAL_DIR)),
                                         env=env, timeout=timeout)
        if not at_base:
            self.test_time.add(result.duration_s)
        if shared:
            self.test_share.spend(result.duration_s)
        if result.timed_out:
            self.test_share.timed_out("base" if at_base else step, timeout, shortened=shortened)
        elif allowance is not None and (ran := stopped_after(result)) is not None:
            self.test_share.shortened(step, ran, self.test_share.base_tests, allowance)
        return result

    async def _fit(self, patch: str, cmd: str, how: HowToVerify, targeted: tuple[str, list[int]] | None, *,
                   shared: bool, step: str) -> tuple[Allowance, _Shortened | None]:
        """A candidate's run's allowance (`TestTimeShare.allow`) and, when its run (`targeted`, else the whole
        suite) is expected not to fit in it, the shortened run instead (reported): the tests failing at the base
        commit, then those reaching what `patch` changes, then (a whole-suite check) the other tests the traced
        run saw, as many as fit; None when it fits or cannot be narrowed."""
        allowance = self.test_share.allow(self.candidate_timeout(how), self.cfg.tests.timeout_floor_s,
                                          tests=len(targeted[1]) if targeted else None, shared=shared)
        if allowance.tests is None:
            return allowance, None
        reach = how.reach
        failing = [reach.ids[i] for i in sorted(reach.failed)] if reach and reach.failed else self.failing_at_base
        if targeted is None and patch.strip():
            targeted = await self._targets(patch, cmd, reach)
        reaching = [reach.ids[i] for i in targeted[1]] if targeted and reach else []
        if step != "verification" and reach:  # a check of the whole suite: then the rest the trace saw, as fit
            reaching += list(reach.ids)
        ids = bounded(failing, reaching, max(allowance.tests, len(failing)))
        while len(ids) > len(failing) and sum(len(i) + 3 for i in ids) > MAX_TARGETED_ARGS_CHARS:
            ids = ids[: max(len(failing), len(ids) * 3 // 4)]  # one command line: the last ones go
        narrowed = targeted_command(cmd, ids) if ids else None
        if narrowed is None:
            return allowance, None
        self.test_share.shortened(step, len(ids), self.test_share.base_tests or (len(reach.ids) if reach else None),
                                  allowance)
        where = {test: i for i, test in enumerate(reach.ids)} if reach else {}
        indexes = [where[i] for i in ids] if reach and all(i in where for i in ids) else None
        return allowance, _Shortened(narrowed, len(ids), indexes)

    async def _verify_repo(self, patch: str, how: HowToVerify, *, whole: bool, final: bool = False) -> Verification:
        cmd = self.test_command(how)
        at_base = not patch.strip()
        result = self._base_runs.pop(cmd, None) if at_base else None
        base_ran = self._base_ran if result is not None else None  # the pre-flight's run, stopped at its time
        targeted = None if (whole or at_base) else await self._targets(patch, cmd, how.reach)
        # a candidate's run (a finalist's whole-suite check too) draws on the test-time share; the report's is grading
        shared = not (at_base or final)
        step = "final" if final else "confirmation" if whole else "verification"
        cut: _Shortened | None = None
        if result is None:
            allowance: Allowance | None = None
            if not at_base:
                allowance, cut = await self._fit(patch, cmd, how, targeted, shared=shared, step=step)
            # a shortened run of traced tests still estimates the whole suite's result; of others, it is its own
            if cut is not None:
                targeted = (cut.command, cut.indexes) if cut.indexes is not None else None
            # pytest itself comes from the environment, not from a `pytest.py` the candidate put in the workspace
            await install_runner(self.sandbox, EVAL_DIR)
            chosen = cut.command if cut else targeted[0] if targeted else cmd
            result = await self._run_tests(chosen, how, at_base=at_base, allowance=allowance, shared=shared,
                                           step=step, shortened=cut is not None)
            if targeted and _missed_tests(result, len(targeted[1])):
                allowance, cut = await self._fit("", cmd, how, None, shared=shared, step=step)
                targeted = None
                result = await self._run_tests(cut.command if cut else cmd, how, at_base=False, allowance=allowance,
                                               shared=shared, step=step, shortened=cut is not None)
        if cut is not None and (ran := stopped_after(result)) is not None:
            # it stopped at its time: its result is that of the tests that ran, no estimate of the others
            targeted, cut = None, replace(cut, tests=ran)
        good, total = _counts(result.output)
        ok = result.ok
        if targeted is not None and how.reach is not None:  # the whole suite's result, estimated
            found = estimate(how.reach, targeted[1], good, total)
            ok = ok and found.estimated_ok
            good, total = found.counts
        score = 1.0 if ok else (good / total if total else 0.0)
        output = "" if result.ok else summarise_failures(result.output, 4000)
        reproduced, passed, output = await self._reproduce_on(how, at_base=at_base, ok=ok, output=output)
        if reproduced is not None:
            score = (score + (0.0 if reproduced else 1.0)) / 2
        return Verification(
            passed=passed, score=score, kind="test_cmd", exit_code=result.exit_code, reproduced=reproduced,
            output=output, counts=(good, total) if total else None,
            targeted=len(targeted[1]) if targeted else cut.tests if cut else base_ran,
            shortened=cut is not None or base_ran is not None,
            seconds=round(result.duration_s, 3),
        )

    async def _reproduce_on(self, how: HowToVerify, *, at_base: bool, ok: bool, output: str
                            ) -> tuple[bool | None, bool | None, str]:
        """(whether the reproduction still fails, None without one; whether the candidate passes; the feedback)
        on the current workspace, given the suite's result (`ok`, `output`)."""
        if how.repro_tests:
            found = await self.run_repro_tests(how.repro_tests, how, at_base=at_base)
            reproduced = found is None or found[0]
            if reproduced and found is not None:  # theirs first: the feedback is cut, and other tests may fail too
                output = failures_first(found[1], output)
            # the report's own tests decide, as a task's tests do: the suite passing, them included, is a fix
            return reproduced, ok and not reproduced, output
        if how.repro:
            reproduced, repro_out = await self.run_repro(how.repro, how)
            if reproduced:
                output = (output + "\n\n" if output else "") + "The issue still reproduces:\n" + repro_out[-1500:]
            # a script the model wrote proves no fix: passing it and the tests is not refuted, no more
            return reproduced, None if (ok and not reproduced) else False, output
        # the tests passed before any change: passing them again shows no regression, not a fix
        passed = (None if ok else False) if how.base is not None and how.base.passed else ok
        return None, passed, output

    # ------------------------------------------------------------------------------------- noop check

    async def files_at(self, patch: str, paths: list[str]) -> dict[str, str | None]:
        """The files `paths` on base + `patch` (None for one that cannot be read), read as data for
        `swe.patch.changes_nothing`; the workspace is reset afterwards."""
        found: dict[str, str | None] = {}
        async with self.at(patch):
            for path in paths:
                try:
                    found[path] = await self.sandbox.read_file(path)
                except (AgentflowError, OSError, ValueError):  # missing, a folder, unreadable: nothing to compare
                    found[path] = None
        return found
