"""Running a candidate in the sandbox: the prompt's examples (feedback a workflow may see) and the hidden
tests (grading only).

A harness (stdlib only, written to the sandbox's /tmp for each run) runs every case in a child process of its
own with a time limit, and sends the outcomes as JSON over the command's side channel
(`exec(..., side_channel=True)`): the child, which runs the candidate, has no access to that channel. A case
passes only when its child exits 0 *and* printed the per-run nonce after the check returned, so a candidate
that calls `sys.exit(0)` or `os._exit(0)` before the check does not pass. On the host, what comes back is
parsed as data only (JSON, sizes capped), never executed.
"""

from __future__ import annotations

import json
import secrets
from typing import Any, Protocol, TypedDict

from pydantic import BaseModel, Field

from agentflow.codegen.task import CodeTask, Example, program
from agentflow.errors import UserError
from agentflow.sandbox.base import ExecResult

HARNESS = r'''
import json, os, subprocess, sys
channel = os.environ.pop("AGENTFLOW_RESULTS_FD", None)
job = json.load(open(sys.argv[1], encoding="utf-8"))
os.remove(sys.argv[1])
CHILD = """
import json, math, sys
def _main():
    nonce = sys.stdin.readline().strip()
    job = json.loads(sys.stdin.read())
    g = {"__name__": "__candidate__"}
    exec(compile(job["program"], "candidate.py", "exec"), g)
    if job["kind"] == "check":
        exec(compile(job["tests"], "tests.py", "exec"), g)
        g["check"](g[job["entry_point"]])
        print(nonce + json.dumps({"ok": True}), flush=True)
        return
    got = eval(job["call"], g)
    if job["kind"] == "text":
        ok = isinstance(got, str)
        print(nonce + json.dumps({"ok": ok, "got": got[:job["limit"]] if ok else repr(got)[:300]}), flush=True)
        return
    expected = eval(job["expected"], g)
    ok = got == expected
    if not ok and isinstance(got, float) and isinstance(expected, (int, float)):
        ok = math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-9)
    print(nonce + json.dumps({"ok": bool(ok), "got": repr(got)[:300]}), flush=True)
_main()
"""
out = []
for case in job["cases"]:
    nonce = os.urandom(12).hex()
    payload = nonce + "\n" + json.dumps(dict(case, program=job["program"], entry_point=job["entry_point"]))
    try:
        p = subprocess.run([sys.executable, "-c", CHILD], input=payload, capture_output=True, text=True,
                           timeout=job["timeout"], close_fds=True)
    except subprocess.TimeoutExpired:
        out.append({"ok": False, "error": "timed out after %ss" % job["timeout"]})
        continue
    lines = [ln[len(nonce):] for ln in p.stdout.splitlines() if ln.startswith(nonce)]
    if p.returncode == 0 and lines:
        out.append(json.loads(lines[-1]))
    else:
        err = (p.stderr.strip().splitlines() or ["exit code %d without a result" % p.returncode])[-1]
        out.append({"ok": False, "error": err[:300]})
with os.fdopen(int(channel), "w") as fh:
    json.dump(out, fh)
'''


class HarnessSandbox(Protocol):
    """What the harness needs of a sandbox: a file written, and a command run with a side channel (every
    sandbox of `agentflow.sandbox`, and a search branch's fork of one)."""

    async def write_file(self, path: str, content: str) -> None: ...

    async def exec(self, command: str, *, timeout: float | None = None,
                   side_channel: bool = False) -> ExecResult: ...


class ReportSummary(TypedDict):
    """A `TestReport` as JSON: what a workflow sees of a candidate's run on the examples."""

    passed: int
    total: int
    all_passed: bool
    failures: list[str]
    """Each failing case described (`CaseResult.describe`)."""


class CaseResult(BaseModel):
    """The outcome of one example (or of the hidden tests)."""

    ok: bool
    call: str = ""
    expected: str = ""
    got: str | None = None
    """repr of the returned value (examples); the text itself from `run_text`."""
    error: str | None = None
    """The last line of the error, or a timeout."""

    def describe(self) -> str:
        if self.ok:
            return f"{self.call} == {self.expected}: passed"
        found = f"returned {self.got}" if self.got is not None else f"raised {self.error}"
        return f"{self.call}: expected {self.expected}, {found}"


class TestReport(BaseModel):
    """Results of a candidate on a set of cases."""

    __test__ = False  # not a pytest class
    cases: list[CaseResult] = Field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(c.ok for c in self.cases)

    @property
    def total(self) -> int:
        return len(self.cases)

    @property
    def all_passed(self) -> bool:
        return bool(self.cases) and self.passed == self.total

    def summary(self) -> ReportSummary:
        return {"passed": self.passed, "total": self.total, "all_passed": self.all_passed,
                "failures": [c.describe() for c in self.cases if not c.ok]}


async def _run_cases(sandbox: HarnessSandbox | None, prog: str, entry_point: str, cases: list[dict[str, Any]],
                     timeout: float) -> list[dict[str, Any]]:
    if sandbox is None:
        raise UserError("generated code runs only in a sandbox, and this run has none",
                        hint="run with --sandbox docker (or --sandbox local: not a security boundary)")
    if not cases:
        return []
    name = secrets.token_hex(6)
    harness, job = f"/tmp/agentflow-codegen-{name}.py", f"/tmp/agentflow-codegen-{name}.json"
    await sandbox.write_file(harness, HARNESS)
    await sandbox.write_file(job, json.dumps({"program": prog, "entry_point": entry_point, "cases": cases,
                                              "timeout": timeout}))
    res = await sandbox.exec(f"python3 {harness} {job}; rm -f {harness}", side_channel=True,
                             timeout=timeout * len(cases) + 30)
    try:
        data = json.loads(res.results or "")
    except ValueError:
        data = None
    if not isinstance(data, list) or len(data) != len(cases):
        why = (res.output.strip().splitlines() or ["the harness sent no results"])[-1][:300]
        return [{"ok": False, "error": f"not run: {why}"} for _ in cases]
    return [d if isinstance(d, dict) else {"ok": False, "error": "unreadable result"} for d in data]


def _field(value: Any, limit: int = 300) -> str | None:
    return None if value is None else str(value)[:limit]


def _result(raw: dict[str, Any], call: str, expected: str, limit: int = 300) -> CaseResult:
    """A case's outcome from the harness's raw result (data only: its text capped, never run)."""
    return CaseResult(ok=raw.get("ok") is True, call=call, expected=expected, got=_field(raw.get("got"), limit),
                      error=_field(raw.get("error")))


async def run_examples(sandbox: HarnessSandbox | None, task: CodeTask, code: str,
                       examples: list[Example] | None = None, *, timeout: float = 10.0) -> TestReport:
    """The candidate `code` on the prompt's examples (or `examples`), each in its own process."""
    examples = task.examples if examples is None else examples
    prog = program(task.prompt, code, task.entry_point)
    cases = [{"kind": "example", "call": e.call, "expected": e.expected} for e in examples]
    raw = await _run_cases(sandbox, prog, task.entry_point, cases, timeout)
    return TestReport(cases=[_result(d, e.call, e.expected) for e, d in zip(examples, raw, strict=True)])


async def grade(sandbox: HarnessSandbox | None, task: CodeTask, code: str, *, timeout: float = 20.0) -> CaseResult:
    """The hidden tests on the candidate: passed or not (the tests' text never leaves this function)."""
    if not task.tests:
        raise ValueError(f"task {task.task_id} has no hidden tests to grade with")
    prog = program(task.prompt, code, task.entry_point)
    raw = await _run_cases(sandbox, prog, task.entry_point, [{"kind": "check", "tests": task.tests}], timeout)
    return _result(raw[0], task.task_id, "hidden tests")


async def _run_call(sandbox: HarnessSandbox | None, code: str, function: str, argument: str,
                    case: dict[str, Any], timeout: float) -> tuple[str, dict[str, Any]]:
    """`function(argument)` of the model-written `code` as one harness case: the call's text and its raw outcome."""
    prog = f"{code}\n\n__ARGUMENT__ = {argument!r}\n"
    call = f"{function}(__ARGUMENT__)"
    raw = await _run_cases(sandbox, prog, function, [dict(case, call=call)], timeout)
    return call, raw[0]


async def run_predicate(sandbox: HarnessSandbox | None, code: str, function: str, argument: str, *,
                        timeout: float = 10.0) -> CaseResult:
    """`function(argument)` of the model-written `code`, run in the sandbox: ok when it returns True."""
    call, raw = await _run_call(sandbox, code, function, argument, {"kind": "example", "expected": "True"}, timeout)
    return _result(raw, call, "True")


async def run_text(sandbox: HarnessSandbox | None, code: str, function: str, argument: str, *,
                   timeout: float = 10.0, limit: int = 8000) -> CaseResult:
    """`function(argument)` of the model-written `code`, run in the sandbox: ok when it returns a string, which is
    `got` (at most `limit` characters; what comes back is text to read, never run)."""
    call, raw = await _run_call(sandbox, code, function, argument,
                                {"kind": "text", "expected": "a string", "limit": limit}, timeout)
    result = _result(raw, call, "a string", limit)
    result.ok = result.ok and isinstance(raw.get("got"), str)
    return result


__all__ = ["CaseResult", "TestReport", "grade", "run_examples", "run_predicate", "run_text"]
