"""Running a task's tests in a sandbox and reading per-test outcomes (SWE-bench's statuses).

With a pytest command, a tiny plugin sends each test's outcome over a pipe the sandbox agent opened for the
command (`exec(..., side_channel=True)`): no file the code under test could overwrite and no line it could
print decides an outcome. The ids to run go through a file and pytest gets their test files, so thousands of
ids fit. `<python> -m pytest` is started by a runner script instead, which imports pytest before the workspace
is on sys.path (so a repository's `pytest.py` or `json.py` cannot stand in for it). Another command's outcomes
are read from its `-rA`-style summary lines, the ids on its command line in chunks that fit.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from agentflow.sandbox.base import ExecResult, Sandbox, sh_command
from agentflow.swe.testparse import parse_pytest_summary

PASSED, FAILED, SKIPPED, ERROR, XFAIL = "PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL"
_STATUSES = frozenset((PASSED, FAILED, SKIPPED, ERROR, XFAIL))
PLUGIN_NAME = "agentflow_results_plugin"
RUNNER_NAME = "agentflow_pytest"
IDS_ENV = "AGENTFLOW_TEST_IDS"
STOP_AFTER_ENV = "AGENTFLOW_STOP_AFTER_S"
"""Read by the runner: seconds after its start at which no further test starts (the run ends as if complete)."""
FIRST_TESTS_ENV = "AGENTFLOW_FIRST_TESTS"
"""Read by the runner (with `STOP_AFTER_ENV`): a file of test files to run first, one a line, in order."""
STOPPED_LINE = re.compile(r"^agentflow: stopped after (\d+) of (\d+) tests", re.MULTILINE)
"""The line the runner prints when it stopped a run at its time (how many tests ran, of how many collected)."""
_ARGS_BUDGET = 100_000  # bytes of test ids per command line for non-pytest commands (Linux allows ~2 MB)


def stop_env(env: Mapping[str, str] | None, stop_after_s: float, first_tests_path: str | None = None,
             ) -> dict[str, str]:
    """`env` with the runner told to start no test after `stop_after_s` seconds (`STOP_AFTER_ENV`) and, given
    `first_tests_path` (a file written in the sandbox), to run the test files it lists first (`FIRST_TESTS_ENV`)."""
    out = {**(env or {}), STOP_AFTER_ENV: f"{stop_after_s:.1f}"}
    if first_tests_path is not None:
        out[FIRST_TESTS_ENV] = first_tests_path
    return out


PLUGIN_SOURCE = '''\
"""Written by agentflow's SWE harness: runs the listed test ids, sends each one's outcome as JSON."""
import json
import os

_outcomes = {}
_channel = os.environ.pop("AGENTFLOW_RESULTS_FD", None)
_ids_file = os.environ.pop("AGENTFLOW_TEST_IDS", None)


def pytest_collection_modifyitems(session, config, items):
    if not _ids_file:
        return
    with open(_ids_file, encoding="utf-8") as fh:
        wanted = set(line.rstrip("\\n") for line in fh if line.strip())
    keep = [item for item in items if item.nodeid in wanted or item.nodeid.split("::", 1)[0] in wanted]
    drop = [item for item in items if item.nodeid not in wanted and item.nodeid.split("::", 1)[0] not in wanted]
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep


def _set(nodeid, status):
    # a failing setup/teardown beats the call's outcome
    if _outcomes.get(nodeid) in ("ERROR", "FAILED") and status == "PASSED":
        return
    _outcomes[nodeid] = status


def pytest_runtest_logreport(report):
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        if report.passed:
            _set(report.nodeid, "PASSED")
        elif report.skipped:
            _set(report.nodeid, "XFAIL" if xfail else "SKIPPED")
        else:
            _set(report.nodeid, "FAILED")
    elif report.failed:
        _set(report.nodeid, "ERROR")
    elif report.skipped and report.when == "setup":
        _set(report.nodeid, "XFAIL" if xfail else "SKIPPED")


def pytest_sessionfinish(session, exitstatus):
    if _channel:
        with os.fdopen(int(_channel), "w", encoding="utf-8") as fh:
            json.dump(_outcomes, fh)
'''

RUNNER_SOURCE = '''\
"""Written by agentflow's SWE harness: starts pytest so that the repository under test cannot stand in for it.

The workspace (and its folders on PYTHONPATH: root, src/) goes last on sys.path while pytest and its plugins
load, and first once pytest loads the conftest files, where `python -m pytest` would have had it all along.
"""
import os
import sys
import time

_started = time.monotonic()
if not getattr(sys.flags, "safe_path", False):
    del sys.path[0]  # this script's folder: only what PYTHONPATH names from it is importable
_workspace = os.getcwd()
_scratch = os.path.dirname(os.path.abspath(__file__))


def _in_tree(entry):
    """The workspace or a folder in it (PYTHONPATH's root and src/), not the harness's scratch folder."""
    path = os.path.abspath(entry or os.curdir)
    inside = path == _workspace or path.startswith(_workspace + os.sep)
    return inside and not (path == _scratch or path.startswith(_scratch + os.sep))


_tree = [entry for entry in sys.path if _in_tree(entry)] or [_workspace]
sys.path[:] = [entry for entry in sys.path if not _in_tree(entry)] + _tree

import pytest  # noqa: E402

# imported by pytest only once the workspace is first (its debugging and faulthandler plugins), and the
# results plugin's json: taken from the standard library now
for _name in ("pdb", "faulthandler", "json"):
    __import__(_name)


class _WorkspaceFirst:
    @pytest.hookimpl(tryfirst=True)
    def pytest_load_initial_conftests(self, early_config, parser, args):
        sys.path[:] = _tree + [entry for entry in sys.path if entry not in _tree]


class _TimeLimit:
    """Given a time (AGENTFLOW_STOP_AFTER_S): no test starts after it; the session ends after the running test,
    says how many of how many ran, and exits as the tests that ran decide (not as interrupted). Given a list of
    test files (AGENTFLOW_FIRST_TESTS, a file of paths), those run first, in its order; the rest as collected."""

    def __init__(self, stop_after_s, first_file):
        self.deadline = _started + stop_after_s
        self.first = []
        if first_file:
            with open(first_file, encoding="utf-8") as fh:
                self.first = [line.strip() for line in fh if line.strip()]
        self.total = self.ran = 0
        self.failed = self.stopped = False

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        rank = {path: i for i, path in enumerate(self.first)}
        items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
        self.total = len(items)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        yield
        self.ran += 1
        if nextitem is not None and time.monotonic() >= self.deadline:
            self.stopped = True
            item.session.shouldstop = "agentflow: the time limit"

    def pytest_runtest_logreport(self, report):
        self.failed = self.failed or report.failed

    def pytest_terminal_summary(self, terminalreporter):
        if self.stopped:
            terminalreporter.write_line("agentflow: stopped after %d of %d tests (the time limit)" % (self.ran, self.total))

    def pytest_sessionfinish(self, session, exitstatus):
        if self.stopped and exitstatus == pytest.ExitCode.INTERRUPTED:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED if self.failed else pytest.ExitCode.OK


_plugins = [_WorkspaceFirst()]
_stop_after = os.environ.pop("AGENTFLOW_STOP_AFTER_S", None)
_first = os.environ.pop("AGENTFLOW_FIRST_TESTS", None)
if _stop_after:
    _plugins.append(_TimeLimit(float(_stop_after), _first))
_code = pytest.main(plugins=_plugins)
sys.stdout.flush()
sys.exit(int(_code))
'''

# SWE-bench's status of each outcome `parse_pytest_summary` reads (an unexpected pass counts as a pass)
_SWE_STATUS = {"passed": PASSED, "xpassed": PASSED, "failed": FAILED, "error": ERROR, "skipped": SKIPPED,
               "xfailed": XFAIL}
# a command that starts with `<python> -m pytest` (the python maybe quoted): it runs in the workspace, so the
# runner script (a relative path) can take the place of `-m pytest`; after a `cd` it could not
_MINUS_M_PYTEST = re.compile(r"^\s*(?P<py>'[^']*'|\"[^\"]*\"|[^\s'\";&|()]+)\s+-m\s+pytest(?=\s|$)")


class TestRun(BaseModel):
    """Outcome of one run of a set of tests."""

    __test__ = False  # not a pytest class

    status: dict[str, str] = Field(default_factory=dict)
    """Test id -> PASSED / FAILED / SKIPPED / ERROR / XFAIL (ids that did not run are absent)."""
    exit_code: int = 0
    timed_out: bool = False
    log: str = ""
    """Command and output (tail) of the run."""


SHIM_DIR = "bin"
"""Folder of the scratch folder put first on the tests' PATH (`python` for a sandbox that has only `python3`)."""


SITE_PLUGINS = "site-plugins"
"""File of the scratch folder naming the pytest plugins (`pytest11` entry points) of the task's installed
requirements, comma-separated (`workspace.install_requirements` writes it)."""


def test_env(scratch: str) -> str:
    """Shell statement giving every test run (the repair's and grading's) one environment: the repository root
    and `src/` importable (the `pytest` script, unlike `python -m pytest`, does not add the root), the task's
    requirements (`scratch/site`), the scratch `bin/` first on PATH (the `python` shim), and, where plugin
    autoload is off, the requirements' pytest plugins loaded by name (`PYTEST_PLUGINS`)."""
    plugins = f"$PWD/{scratch}/{SITE_PLUGINS}"
    return (
        f'export PATH="$PWD/{scratch}/{SHIM_DIR}:$PATH" '
        f'PYTHONPATH="$PWD$([ -d src ] && printf %s ":$PWD/src"):$PWD/{scratch}/site${{PYTHONPATH:+:$PYTHONPATH}}"; '
        f'if [ -n "$PYTEST_DISABLE_PLUGIN_AUTOLOAD" ] && [ -s "{plugins}" ]; then '
        f'export PYTEST_PLUGINS="$(cat "{plugins}")${{PYTEST_PLUGINS:+,$PYTEST_PLUGINS}}"; fi; '
    )


def default_test_cmd(python: str) -> str:
    # outcomes come from the plugin's side channel, so pytest need not print a line per passed test (`-rA`
    # costs minutes on a suite of thousands under a loaded CPU); failures and errors stay in the log
    return f"{python} -m pytest -rfE -p no:cacheprovider"


def runner_command(test_cmd: str, scratch: str) -> str:
    """`test_cmd` with its leading `<python> -m pytest` run by the runner script in `scratch` (others as they are)."""

    def swap(match: re.Match[str]) -> str:
        py = match.group("py")
        if "python" not in py.strip("'\"").rsplit("/", 1)[-1]:
            return match.group(0)
        return match.group(0)[: match.start("py")] + f"{py} {shlex.quote(f'{scratch}/{RUNNER_NAME}.py')}"

    return _MINUS_M_PYTEST.sub(swap, test_cmd, count=1)


async def install_runner(sandbox: Sandbox, scratch: str) -> None:
    """(Re)write the runner script that `runner_command` runs into the sandbox's `scratch` folder."""
    await sandbox.write_file(f"{scratch}/{RUNNER_NAME}.py", RUNNER_SOURCE)


def parse_summary(output: str) -> dict[str, str]:
    """SWE-bench statuses of the test ids (`path::name`) in pytest's `-rA` short summary lines (used when the
    plugin cannot be)."""
    return {t: _SWE_STATUS[o] for t, o in parse_pytest_summary(output).items() if "::" in t}


def passed(test_id: str, status: Mapping[str, str]) -> bool:
    """A FAIL_TO_PASS test passed: it ran and PASSED. Skipped or xfailed is not passed: `pytest.skip()` or
    `pytest.xfail()` called from library code would otherwise turn a failing test into a pass."""
    return status.get(test_id) == PASSED


def maintained(test_id: str, status: Mapping[str, str]) -> bool:
    return status.get(test_id) in (PASSED, XFAIL, SKIPPED)


async def run_tests(
    sandbox: Sandbox,
    test_ids: Sequence[str],
    *,
    test_cmd: str,
    scratch: str,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
) -> TestRun:
    """Run `test_ids` with `test_cmd` in the sandbox workspace and return each test's outcome."""
    if not test_ids:
        return TestRun()
    if "pytest" in test_cmd:
        return await _run_pytest(sandbox, test_ids, test_cmd, scratch, timeout, env)
    runs = [
        await _run_command(sandbox, test_cmd + " " + " ".join(shlex.quote(t) for t in chunk), scratch, timeout, env)
        for chunk in _chunks(test_ids, _ARGS_BUDGET)
    ]
    return TestRun(
        status={test: s for result, _ in runs for test, s in parse_summary(result.output).items()},
        exit_code=next((r.exit_code for r, _ in runs if r.exit_code), 0),
        timed_out=any(r.timed_out for r, _ in runs),
        log="\n\n".join(log for _, log in runs)[-20000:],
    )


def test_files(test_ids: Sequence[str]) -> list[str]:
    """The files to hand pytest for `test_ids` (`path::name[param]` -> `path`), in first-seen order."""
    return list(dict.fromkeys(t.split("::", 1)[0] for t in test_ids))


def _chunks(ids: Sequence[str], budget: int) -> list[list[str]]:
    chunks: list[list[str]] = [[]]
    size = 0
    for t in ids:
        if chunks[-1] and size + len(t) + 3 > budget:
            chunks.append([])
            size = 0
        chunks[-1].append(t)
        size += len(t) + 3
    return chunks


async def _run_command(
    sandbox: Sandbox, command: str, scratch: str, timeout: float | None, env: Mapping[str, str] | None,
    *, side_channel: bool = False, extra_env: str = "",
) -> tuple[ExecResult, str]:
    # the plugin and the task's installed requirements (scratch/site) are importable by the tests
    prefix = f"{test_env(scratch)}PYTHONPATH=\"$PWD/{scratch}:$PYTHONPATH\" {extra_env}"
    kwargs: dict[str, Any] = {"side_channel": True} if side_channel else {}
    result = await sandbox.exec(
        sh_command(prefix + command), env=dict(env or {}) or None, timeout=timeout, **kwargs
    )
    log = f"$ {command}\n(exit {result.exit_code}{', timed out' if result.timed_out else ''})\n{result.output[-20000:]}"
    return result, log


async def _run_pytest(
    sandbox: Sandbox, test_ids: Sequence[str], test_cmd: str, scratch: str, timeout: float | None,
    env: Mapping[str, str] | None,
) -> TestRun:
    ids_file = f"{scratch}/test_ids.txt"
    await sandbox.write_file(f"{scratch}/{PLUGIN_NAME}.py", PLUGIN_SOURCE)
    await install_runner(sandbox, scratch)
    await sandbox.write_file(ids_file, "".join(f"{t}\n" for t in test_ids))
    files = " ".join(shlex.quote(f) for f in test_files(test_ids))
    command = f"{runner_command(test_cmd, scratch)} -p {PLUGIN_NAME} {files}"
    result, log = await _run_command(
        sandbox, command, scratch, timeout, env, side_channel=True, extra_env=f'{IDS_ENV}="$PWD/{ids_file}" '
    )
    status: dict[str, str] = {}
    if result.results:
        try:
            data = json.loads(result.results)
        except ValueError:
            data = None
        if isinstance(data, dict):
            status = {str(k): str(v) for k, v in data.items() if v in _STATUSES}
    if not status and not result.timed_out:
        log += "\n(no outcomes came back from the test run: every listed test counts as not passed)"
    return TestRun(status=status, exit_code=result.exit_code, timed_out=result.timed_out, log=log)
