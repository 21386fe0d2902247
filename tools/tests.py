"""Pack `tests`: run pytest in the sandbox and report pass/fail per test id."""

from __future__ import annotations

import re
import shlex

from agentflow.tools import ToolResult, tool
from agentflow.tools.context import ToolContext

_OUTCOME = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\s+(\S+?)(?:\s+-\s+(.*))?$")


def parse_pytest(output: str) -> dict[str, str]:
    """{test id: outcome} from the `-rA` short summary of pytest's output."""
    outcomes: dict[str, str] = {}
    for line in output.splitlines():
        m = _OUTCOME.match(line.strip())
        if m and not m.group(2).startswith("["):
            outcomes[m.group(2)] = m.group(1).lower()
    return outcomes


@tool(timeout=None)
async def run_tests(
    ctx: ToolContext, test_ids: list[str] | None = None, path: str = ".", timeout: float | None = None
) -> ToolResult:
    """Run pytest (all tests, or only the given test ids) and report which tests passed and failed.

    Args:
        test_ids: pytest node ids such as "tests/test_a.py::test_x"; empty runs every test.
        path: directory to run pytest in, relative to the workspace.
        timeout: seconds before the run is killed (default: the sandbox's command limit).
    """
    ids = " ".join(shlex.quote(t) for t in (test_ids or []))
    cmd = f"python3 -m pytest -rA -q --tb=short --color=no -p no:cacheprovider {ids}"
    res = await ctx.require_sandbox().exec(cmd, cwd=path, timeout=timeout)
    outcomes = parse_pytest(res.stdout)
    passed = sorted(t for t, o in outcomes.items() if o in ("passed", "xfail"))
    failed = sorted(t for t, o in outcomes.items() if o in ("failed", "error", "xpass"))
    tail = "\n".join(res.stdout.strip().splitlines()[-1:])
    # ran: pytest reported an outcome per test. Anything else (pytest missing, exit 127, no tests collected,
    # an unparsable run) is not "0 passed, 0 failed": the tests did not run, and the result says so
    ran = bool(outcomes) and not res.timed_out
    if res.timed_out:
        summary = f"pytest timed out after {res.duration_s:.0f}s"
    elif res.exit_code == 5:
        summary = "the tests did not run: pytest collected no tests"
    elif not ran:
        said = (res.stderr.strip() or res.stdout.strip()).splitlines()[-1:] or [""]
        summary = f"the tests did not run: pytest could not run (exit code {res.exit_code}) {said[0][:200]}".rstrip()
    elif res.exit_code in (0, 1):
        summary = f"{len(passed)} passed, {len(failed)} failed" + (f" ({tail})" if tail else "")
    else:
        summary = f"pytest could not run (exit code {res.exit_code})"
    text = summary
    if failed:
        text += "\nFAILED: " + ", ".join(failed[:30])
        failure_part = res.stdout.split("= FAILURES =")[-1] if "= FAILURES =" in res.stdout else ""
        if failure_part:
            text += "\n" + failure_part[:4000]
    elif not ran or res.exit_code not in (0, 1):
        text += "\n" + (res.stdout + res.stderr)[-3000:]
    return ToolResult(
        ok=res.exit_code == 0 and ran,
        text=text,
        error=None if res.exit_code == 0 and ran else summary,
        data={
            "exit_code": res.exit_code,
            "passed": passed,
            "failed": failed,
            "outcomes": outcomes,
            "timed_out": res.timed_out,
            "ran": ran,
        },
    )
