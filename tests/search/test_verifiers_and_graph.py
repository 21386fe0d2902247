"""Verifiers on real parts: pytest in LocalSandboxes (shared snapshot store), a critic from a replay cassette,
their composition inside best-of-N, and a search running as a workflow node around a rollout subgraph."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any, TypedDict

import pytest

from agentflow.budget import Budget
from agentflow.events import EventLog
from agentflow.models.replay import ReplayModel
from agentflow.search import (
    BestOfN,
    Candidate,
    CompositeVerifier,
    CriticVerifier,
    GraphRolloutPolicy,
    NodeState,
    RolloutContext,
    StepPolicy,
    TestVerifier,
    VerifyContext,
    VoteVerifier,
    WorkspacePool,
    search_node,
)

CASSETTES = Path(__file__).with_name("cassettes")
TESTS = "from calc import add\n\ndef test_add():\n    assert add(1, 2) == 3\n\ndef test_zero():\n    assert add(0, 0) == 0\n"
BUGGY = "def add(a, b):\n    return a - b\n"
# rollout i writes VARIANTS[i]: wrong (only test_zero passes), right with odd formatting, right.
VARIANTS = [BUGGY, "def add(a, b):\n    return (a + b)  # fixed\n", "def add(a, b):\n    return a + b\n"]
PYTEST = f"{sys.executable} -m pytest -rA -q -p no:cacheprovider"


class PatchPolicy(StepPolicy):
    """Rollout i edits calc.py in its workspace and returns the diff as its output."""

    async def rollout(self, state: NodeState, ctx: RolloutContext) -> NodeState:
        index = int(ctx.node_id.rsplit(".", 1)[1])
        ws: Any = ctx.workspace
        await ws.write_file("calc.py", VARIANTS[index])
        ctx.charge_tool()
        return state.child(done=True, output=await ws.diff(state.snapshot_id), files={"calc.py": VARIANTS[index]})


@pytest.fixture
async def pool(tmp_path: Path):
    from agentflow.sandbox.local import LocalSandbox

    store = tmp_path / "store"
    boxes = [await LocalSandbox.start(store=store) for _ in range(2)]
    try:
        await boxes[0].write_file("calc.py", BUGGY)
        await boxes[0].write_file("test_calc.py", TESTS)
        yield boxes
    finally:
        for box in boxes:
            await box.close()


async def test_tests_then_critic_selection_on_real_pytest_runs_in_sandboxes(pool) -> None:
    budget = Budget()
    log = EventLog()
    verifier = CompositeVerifier([
        TestVerifier(PYTEST, timeout=60),
        CriticVerifier(ReplayModel(CASSETTES / "critic.json"), task="Fix add() in calc.py"),
    ])
    search = BestOfN(PatchPolicy(), verifier, n=3, concurrency=2, select="tests_then_critic")
    result = await search.run(budget=budget, events=log, workspaces=WorkspacePool(pool))

    wrong, odd, right = result.candidates
    assert wrong.verification.tests == {"test_calc.py::test_add": "failed", "test_calc.py::test_zero": "passed"}
    assert wrong.verification.passed is False and wrong.verification.parts["tests"] == 0.5
    assert odd.verification.passed and right.verification.passed
    assert [c.verification.critic_score for c in result.candidates] == [0.9, 0.3, 0.8]
    assert "add(a, b) returns a + b, matching test_add" in right.verification.evidence
    # tests rank the two passing patches equal; the critic breaks the tie
    assert result.best is right
    assert result.coverage is True and result.pass_at_k[1] == pytest.approx(2 / 3)
    # every candidate's snapshot really holds its variant
    for cand, variant in zip(result.candidates, VARIANTS, strict=True):
        await pool[1].restore(cand.state.snapshot_id)
        assert await pool[1].read_file("calc.py") == variant
    # the critic's calls are charged to the run's budget, the edits as tool calls
    assert budget.used.model_calls == 3 and budget.used.tokens == 3 * 150 and budget.used.tool_calls == 3
    assert result.usage.model_calls == 3
    nodes = [e for e in log.events if e.kind == "search.node"]
    assert {e.node_id for e in nodes} == {"0", "0.0", "0.1", "0.2"}
    assert all(e.data["snapshot_id"] for e in nodes)

    # the same candidates under a majority vote: the two equivalent fixes form the biggest cluster
    from agentflow.search import select

    assert select(result.candidates, "vote") is right
    shares = await VoteVerifier().verify(result.candidates, VerifyContext())
    assert [v.vote_share for v in shares] == pytest.approx([1 / 3, 2 / 3, 2 / 3])


async def test_test_verifier_with_must_pass_and_junit(pool) -> None:
    sb = pool[0]
    base = await sb.snapshot()
    verifier = TestVerifier(PYTEST + " --junitxml=report.xml", junit_path="report.xml", must_pass=["test_calc::test_zero"],
                            sandbox=sb)
    [v] = await verifier.verify([Candidate("0", NodeState(snapshot_id=base, done=True))], VerifyContext())
    assert v.tests == {"test_calc::test_add": "failed", "test_calc::test_zero": "passed"}
    assert v.passed is True and v.score == 0.5
    missing = TestVerifier("true", junit_path="nope.xml", sandbox=sb)
    [m] = await missing.verify([Candidate("0", NodeState(done=True))], VerifyContext())
    assert m.passed is False and m.error


async def test_critic_judges_partial_rollouts_and_reports_invalid_replies() -> None:
    critic = CriticVerifier(ReplayModel(CASSETTES / "critic.json"), task="Fix add()")
    from agentflow.models.base import Message

    partial = Candidate("0.1", NodeState(messages=[Message.user("Fix add()"), Message.assistant("Reading calc.py")]))
    request = critic.request(partial)
    assert "unfinished" in request.messages[1].content and "Reading calc.py" in request.messages[1].content
    ctx = VerifyContext(budget=Budget())
    [v] = await critic.verify([partial], ctx)
    assert v.score == 0.9 and v.passed is None and ctx.usage.model_calls == 1

    bad = CriticVerifier(ReplayModel(CASSETTES / "critic_invalid.json"), task="Fix add()")
    [b] = await bad.verify([Candidate("0", NodeState(done=True, output="x"))], VerifyContext())
    assert b.score == 0.0 and b.error and "score" in b.error


class Inner(TypedDict, total=False):
    question: str
    seed: int
    answer: str


class Outer(TypedDict, total=False):
    question: str
    search: dict


def answer(state: Inner) -> dict[str, Any]:
    rng = random.Random(state["seed"])
    return {"answer": "42" if rng.random() < 0.5 else f"wrong {rng.randrange(1000)}"}


async def test_search_node_wraps_a_rollout_subgraph_in_a_workflow(tmp_path: Path) -> None:
    from agentflow.graph import END, RunContext, Workflow, WorkflowRunner
    from agentflow.graph.compile import compile_workflow

    rollout = Workflow("rollout", state=Inner).node("answer", answer).edge("answer", END)
    inner = compile_workflow(rollout.spec, RunContext(), None)
    policy = GraphRolloutPolicy(inner, inputs=lambda s: {"question": "6*7?"}, output_key="answer")
    search = BestOfN(policy, None, n=6, concurrency=3, select="vote", seed=5,
                     oracle=lambda c: c.output == "42")
    node = search_node(search, output_key="search")
    outer = Workflow("outer", state=Outer).node("search", node, writes=["search"]).edge("search", END)
    log = EventLog(tmp_path / "events.jsonl", run_id="run-1")
    context = RunContext(events=log, budget=Budget())
    async with WorkflowRunner(outer.spec, run_dir=tmp_path, context=context) as runner:
        result = await runner.start({"question": "6*7?"})
        again = await runner.start({"question": "6*7?"})
    report = result.state["search"]
    assert report["candidates"] == 6 and report["stop_reason"] == "completed"
    assert report["best_output"] == "42" and report["coverage"] is True
    assert again.state["search"] == report  # seeded: the same rollouts again
    kinds = [e.kind for e in log.events]
    assert "node.start" in kinds and kinds.count("search.end") == 2
    assert sum(1 for e in log.events if e.kind == "search.node") == 2 * 7


class AppendPolicy(StepPolicy):
    """Each step appends one line to notes.txt in the workspace; the file is the path of actions taken."""

    async def propose(self, state: NodeState, k: int, ctx: RolloutContext) -> list[Any]:
        from agentflow.search import Action

        ctx.charge_model()
        return [Action(text=f"line {ctx.node_id}.{i}") for i in range(k)]

    async def apply(self, state: NodeState, action: Any, ctx: RolloutContext) -> NodeState:
        ws: Any = ctx.workspace
        text = await ws.read_file("notes.txt")
        await ws.write_file("notes.txt", text + action.text + "\n")
        return state.child(done=state.depth + 1 >= 3, output="notes" if state.depth + 1 >= 3 else None)


async def test_mcts_nodes_are_workspace_snapshots_restored_across_a_pool_of_sandboxes(pool) -> None:
    from agentflow.search import MCTS, FunctionVerifier

    await pool[0].write_file("notes.txt", "")
    verifier = FunctionVerifier(lambda c: 0.5, name="flat")
    result = await MCTS(AppendPolicy(), verifier, k=2, concurrency=2, max_expansions=4, widening=0).run(
        workspaces=pool
    )
    by_id = {n.node_id: n for n in result.tree}
    assert len(result.tree) == 1 + 4 * 2 and len({n.snapshot_id for n in result.tree}) == len(result.tree)
    for node in result.tree:
        expected, cur = [], node
        while cur.parent_id is not None:
            expected.append(cur.action)
            cur = by_id[cur.parent_id]
        await pool[1].restore(node.snapshot_id)
        assert (await pool[1].read_file("notes.txt")).splitlines() == list(reversed(expected))


async def test_chat_policy_mcts_from_a_cassette_attributes_model_calls_to_tree_nodes() -> None:
    from agentflow.models.instrumented import InstrumentedModel
    from agentflow.search import MCTS, ChatPolicy, FunctionVerifier

    budget, log = Budget(), EventLog()
    model = InstrumentedModel(ReplayModel(CASSETTES / "chat_policy.json"), budget=budget, events=log)
    policy = ChatPolicy(model, task="What is 6*7?")

    def check(cand: Candidate) -> Any:
        from agentflow.search import Verification

        if not cand.state.done:
            return 0.5
        return Verification(score=float(cand.output == "42"), passed=cand.output == "42")

    result = await MCTS(policy, FunctionVerifier(check), k=2, concurrency=1).run(budget=budget, events=log)
    assert result.stop_reason == "solved" and result.best is not None
    assert result.best.output == "42" and result.best.node_id == "0.0.0"
    assert [c.output for c in result.candidates] == ["41", "42", "40"]
    # the winning path: the task, the first step, the nudge to continue, the answer
    roles = [m.role for m in result.best.state.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    calls = [e for e in log.events if e.kind == "model.call"]
    assert [(e.node_id, e.parent_id) for e in calls] == [("0", None), ("0.0", "0")]
    assert budget.used.model_calls == 2 and budget.used.tokens == 100
    by_id = {n.node_id: n for n in result.tree}
    assert by_id["0"].usage.model_calls == 1 and by_id["0.0"].usage.model_calls == 1
    assert result.best.usage.model_calls == 2


@pytest.mark.docker
async def test_best_of_n_with_tests_in_a_docker_sandbox() -> None:
    from agentflow.errors import UserError

    try:
        from agentflow.sandbox import SandboxConfig, open_sandbox
        from agentflow.sandbox.docker import docker_client
        from agentflow.sandbox.image import ensure_image

        docker_client()
        image = ensure_image()
    except (UserError, ImportError) as exc:
        pytest.skip(f"Docker sandbox not available: {exc}")
    async with open_sandbox("docker", SandboxConfig(image=image)) as sb:
        await sb.write_file("calc.py", BUGGY)
        await sb.write_file("test_calc.py", TESTS)
        verifier = TestVerifier("python3 -m pytest -rA -q -p no:cacheprovider", timeout=60)
        result = await BestOfN(PatchPolicy(), verifier, n=3, concurrency=1, select="tests").run(workspaces=sb)
    assert [c.verification.passed for c in result.candidates] == [False, True, True]
    assert result.candidates[0].verification.tests["test_calc.py::test_add"] == "failed"
    assert result.best is result.candidates[1] and result.coverage is True
