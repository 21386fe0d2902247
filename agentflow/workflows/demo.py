"""Model-free node functions used by the shipped `demo` workflow (and handy in tests and docs).

Each takes the keys of `DemoState` (the keys of the shipped workflows that name these functions) and returns a
plain dict of updates, not a `DemoState`: `Workflow.node` would read a TypedDict return type as "writes every
key", and each of these writes a few (the workflows list them under `writes:`).
"""

from __future__ import annotations

from typing import TypedDict

from agentflow.errors import NodeFailed
from agentflow.graph.run.context import NodeContext
from agentflow.graph.run.workspace import workspace_diff


class IssueRecord(TypedDict, total=False):
    """One issue of the critic agent's output (`agentflow.agents.schemas.Issue` as JSON)."""

    severity: str
    location: str
    description: str
    suggestion: str


class CritiqueRecord(TypedDict, total=False):
    """The critic agent's output (`agentflow.agents.schemas.Critique` as JSON)."""

    issues: list[IssueRecord]
    summary: str


class CheckRecord(TypedDict):
    """What `check_work` found of a change's tests."""

    ok: bool
    summary: str
    failed: list[str]


class DemoState(TypedDict, total=False):
    """The state keys these functions read (of the `demo`, `plan_code_critique`, `plan_code_search` workflows)."""

    topic: str
    rounds: int
    """demo: the drafting rounds to make; plan_code_critique: the review rounds made."""
    max_rounds: int
    count: int
    notes: list[str]
    critique: CritiqueRecord | None
    tests: CheckRecord
    attempts: int
    max_attempts: int


def prepare(state: DemoState) -> dict[str, object]:
    """Normalise the topic and start the count."""
    topic = str(state.get("topic") or "agentflow").strip()
    return {"topic": topic, "count": 0, "notes": [f"topic: {topic}"]}


def outline(state: DemoState) -> dict[str, object]:
    return {"notes": [f"outline of {state['topic']}"]}


def examples(state: DemoState) -> dict[str, object]:
    return {"notes": [f"examples for {state['topic']}"]}


def draft(state: DemoState) -> dict[str, object]:
    """One drafting round; the route after it loops until `rounds` rounds are done."""
    count = int(state.get("count") or 0) + 1
    done = count >= int(state.get("rounds") or 2)
    return {"count": count, "status": "done" if done else "again", "notes": [f"draft round {count}"]}


def summarize(state: DemoState) -> dict[str, object]:
    return {
        "summary": f"{state['topic']}: {len(state.get('notes') or [])} notes after {state.get('count')} rounds"
    }


async def check_work(state: DemoState, ctx: NodeContext[object]) -> dict[str, object]:
    """After the coder: what it changed in the sandbox (`diff`) and the test results (`tests`), run through
    the journaled `run_tests` tool. Without a sandbox there is nothing to check: that fails the node."""
    sandbox = ctx.run.sandbox
    if sandbox is None:
        raise RuntimeError("check_work needs a sandbox holding the workspace (agentflow run --sandbox/--workspace)")
    diff = await workspace_diff(sandbox)
    result = await ctx.call_tool("run_tests", {})
    data = dict(result.data or {})
    summary = result.text.splitlines()[0] if result.text else ""
    if data.get("ran") is False or result.data is None:  # pytest missing, no tests collected: nothing checked
        raise NodeFailed(ctx.node, "tests_not_run", summary or result.error or "the tests did not run")
    tests: CheckRecord = {"ok": result.ok, "summary": summary, "failed": data.get("failed", [])}
    return {"diff": diff, "tests": tests}


def review_gate(state: DemoState) -> dict[str, object]:
    """After the critic: accept when no critical/major issue is left and the tests (when run) pass; revise
    otherwise, up to `max_rounds` rounds, then stop with verdict `max_rounds`.

    A missing critique is never read as "no issues": it fails the node (and so the run)."""
    critique = state.get("critique")
    if not critique:
        raise ValueError("review_gate: the state has no critique to review (did the critic fail?)")
    blocking = [i for i in critique.get("issues") or [] if i.get("severity") in ("critical", "major")]
    tests = state.get("tests")
    failing = isinstance(tests, dict) and tests.get("ok") is False
    rounds = int(state.get("rounds") or 0) + 1
    if not blocking and not failing:
        verdict = "accept"
    else:
        verdict = "max_rounds" if rounds >= int(state.get("max_rounds") or 3) else "revise"
    return {"rounds": rounds, "verdict": verdict}


def tests_gate(state: DemoState) -> dict[str, object]:
    """After an attempt's check: `pass` when its tests pass, else `retry` until `max_attempts` attempts were
    made, then `stop` (the attempt is over, its tests failing)."""
    tests = state.get("tests")
    attempts = int(state.get("attempts") or 0) + 1
    if isinstance(tests, dict) and tests.get("ok"):
        verdict = "pass"
    else:
        verdict = "stop" if attempts >= int(state.get("max_attempts") or 2) else "retry"
    return {"attempts": attempts, "verdict": verdict}
