"""Running a task's tests in a sandbox and reading per-test outcomes.

With a pytest command, a tiny plugin (written into the workspace's scratch folder) records the outcome of
every test id as pytest names it, in a JSON file. With another command, outcomes are read from the
`-rA`-style summary lines (`PASSED id`, `FAILED id - ...`), as the SWE-bench harness does.
Statuses are SWE-bench's: PASSED, FAILED, SKIPPED, ERROR, XFAIL.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

from agentflow.sandbox.base import Sandbox

PASSED, FAILED, SKIPPED, ERROR, XFAIL = "PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL"
PLUGIN_NAME = "agentflow_results_plugin"
RESULTS_ENV = "AGENTFLOW_TEST_RESULTS"

PLUGIN_SOURCE = '''\
"""Written by agentflow's SWE harness: records each test's outcome as JSON."""
import json
import os

_outcomes = {}


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
    path = os.environ.get("AGENTFLOW_TEST_RESULTS")
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(_outcomes, fh)
'''

_SUMMARY_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\s+(\S+::\S+)")


class TestRun(BaseModel):
    """Outcome of one run of a set of tests."""

    __test__ = False  # not a pytest class

    status: dict[str, str] = Field(default_factory=dict)
    """Test id -> PASSED / FAILED / SKIPPED / ERROR / XFAIL (ids that did not run are absent)."""
    exit_code: int = 0
    timed_out: bool = False
    log: str = ""
    """Command and output (tail) of the run."""


def default_test_cmd(python: str) -> str:
    return f"{python} -m pytest -rA -p no:cacheprovider"


def parse_summary(output: str) -> dict[str, str]:
    """Outcomes from pytest's `-rA` short summary lines (used when the plugin cannot be)."""
    status: dict[str, str] = {}
    for line in output.splitlines():
        match = _SUMMARY_LINE.match(line.strip())
        if match:
            kind, test_id = match.groups()
            status[test_id] = PASSED if kind == "XPASS" else kind
    return status


def passed(test_id: str, status: Mapping[str, str]) -> bool:
    return status.get(test_id) in (PASSED, XFAIL)


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
    uses_pytest = "pytest" in test_cmd
    results_file = f"{scratch}/results.json"
    run_env = dict(env or {})
    command = test_cmd
    # the plugin and the task's installed requirements (scratch/site) are importable by the tests
    prefix = f"rm -f {shlex.quote(results_file)}; "
    prefix += f"PYTHONPATH=\"$PWD/{scratch}:$PWD/{scratch}/site${{PYTHONPATH:+:$PYTHONPATH}}\" "
    if uses_pytest:
        await sandbox.write_file(f"{scratch}/{PLUGIN_NAME}.py", PLUGIN_SOURCE)
        command += f" -p {PLUGIN_NAME}"
        prefix += f"{RESULTS_ENV}=\"$PWD/{results_file}\" "
    command += " " + " ".join(shlex.quote(t) for t in test_ids)
    result = await sandbox.exec(f"sh -c {shlex.quote(prefix + command)}", env=run_env or None, timeout=timeout)
    status: dict[str, str] = {}
    if uses_pytest and not result.timed_out:
        try:
            status = json.loads(await sandbox.read_file(results_file))
        except Exception:  # noqa: BLE001 - pytest died before writing; fall back to the summary lines
            status = {}
    if not status:
        status = parse_summary(result.output)
    log = f"$ {command}\n(exit {result.exit_code}{', timed out' if result.timed_out else ''})\n{result.output[-20000:]}"
    return TestRun(status=status, exit_code=result.exit_code, timed_out=result.timed_out, log=log)
