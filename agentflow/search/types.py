"""Data of a search: node states, actions, verifications, candidates, tree nodes and the result.

Plain dataclasses (not pydantic): the search creates many of them and its bookkeeping must stay cheap.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from agentflow.budget import BudgetKind
from agentflow.models.base import Message, Usage


@dataclass
class SearchUsage:
    """Model and tool usage attributed to one tree node (or summed over several)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    model_calls: int = 0
    tool_calls: int = 0

    def add_model(self, usage: Usage | None = None, *, calls: int = 1) -> None:
        if usage is not None:
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            self.cost_usd += usage.cost_usd or 0.0
        self.model_calls += calls

    def merge(self, other: SearchUsage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cost_usd += other.cost_usd
        self.model_calls += other.model_calls
        self.tool_calls += other.tool_calls

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "cost_usd": self.cost_usd,
                "model_calls": self.model_calls, "tool_calls": self.tool_calls}


@dataclass
class Action:
    """One step a policy proposes from a node (a model's reply, a tool call, an edit...)."""

    text: str
    """What the step is, human-readable (recorded as the tree node's `action`)."""
    prior: float = 1.0
    """The policy's prior for this step (PUCT uses it; siblings' priors are normalised)."""
    message: Message | None = None
    """The assistant message that chose this step, when a chat model did."""
    data: dict[str, Any] = field(default_factory=dict)
    """Policy-specific payload (e.g. the tool call to run)."""


@dataclass
class NodeState:
    """A partial rollout: the conversation so far and the workspace state it left."""

    messages: list[Message] = field(default_factory=list)
    snapshot_id: str | None = None
    """Workspace snapshot after this node's steps (None when the search has no workspace)."""
    depth: int = 0
    done: bool = False
    """True when the rollout is finished (the policy produced its final output)."""
    output: str | None = None
    """The final output (e.g. a patch) once `done`."""
    files: dict[str, str] = field(default_factory=dict)
    """Contents of the files the rollout changed, when known (used to normalise outputs for votes)."""
    data: dict[str, Any] = field(default_factory=dict)
    """Policy-specific state."""

    def child(self, **changes: Any) -> NodeState:
        """A copy one step deeper; lists and dicts are copied so the parent stays as it was."""
        base = NodeState(
            messages=list(self.messages), snapshot_id=self.snapshot_id, depth=self.depth + 1,
            done=self.done, output=self.output, files=dict(self.files), data=dict(self.data),
        )
        for key, value in changes.items():
            setattr(base, key, value)
        return base


@dataclass
class Verification:
    """What a verifier (or a composition of them) concluded about one candidate or partial rollout."""

    score: float = 0.0
    """Value in [0, 1]; higher is better."""
    passed: bool | None = None
    """True/False when a verifier can decide correctness (tests); None when it can only judge (critic, vote)."""
    tests: dict[str, str] = field(default_factory=dict)
    """Per-test outcome: test id -> passed | failed | error | skipped | xfailed | xpassed."""
    critic_score: float | None = None
    evidence: list[str] = field(default_factory=list)
    """Critic's evidence for its score, or other observations."""
    vote_share: float | None = None
    """Share of candidates whose normalised output equals this one's."""
    parts: dict[str, float] = field(default_factory=dict)
    """Score of each verifier of a composition, by verifier name."""
    error: str | None = None
    """Why verification could not run (the candidate then scores 0)."""

    @property
    def tests_passed(self) -> int:
        return sum(1 for v in self.tests.values() if v in ("passed", "xfailed"))

    @property
    def tests_failed(self) -> int:
        return sum(1 for v in self.tests.values() if v in ("failed", "error", "xpassed"))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Candidate:
    """A finished (or, for partial-value checks, unfinished) rollout with what verifiers said about it."""

    node_id: str
    state: NodeState
    verification: Verification | None = None
    usage: SearchUsage = field(default_factory=SearchUsage)
    """Usage of the whole path from the root to this candidate."""
    correct: bool | None = None
    """Ground truth from the oracle, when one is known (used for coverage and pass@k, never for selection)."""

    @property
    def output(self) -> str | None:
        return self.state.output

    @property
    def score(self) -> float:
        return self.verification.score if self.verification is not None else 0.0

    @property
    def verified(self) -> bool:
        return self.verification is not None and self.verification.passed is True

    def to_dict(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id, "output": self.output, "score": self.score, "correct": self.correct,
            "verification": self.verification.to_dict() if self.verification else None,
            "usage": self.usage.to_dict(), "snapshot_id": self.state.snapshot_id,
        }


@dataclass
class TreeNode:
    """One node of the search tree as recorded in the events file (`search.node`)."""

    node_id: str
    parent_id: str | None
    action: str | None
    value: float
    """Mean backed-up value (value_sum / visits)."""
    visits: int
    snapshot_id: str | None
    usage: SearchUsage
    depth: int = 0
    terminal: bool = False
    passed: bool | None = None

    def event_data(self) -> dict[str, Any]:
        return {
            "action": self.action, "value": self.value, "visits": self.visits,
            "snapshot_id": self.snapshot_id, "usage": self.usage.to_dict(), "depth": self.depth,
            "terminal": self.terminal, "passed": self.passed,
        }


@dataclass
class SearchResult:
    """The outcome of a search: the selected candidate, every candidate, why it stopped, and the tree."""

    best: Candidate | None
    candidates: list[Candidate]
    stop_reason: str
    """`solved`, `completed`, `budget`, `depth`, `exhausted` or `iterations`."""
    coverage: bool | None
    """Whether any candidate is correct (None when there is no oracle and no deciding verifier)."""
    pass_at_k: dict[int, float]
    tree: list[TreeNode]
    budget_kind: BudgetKind | None = None
    """Which budget limit stopped the search, when `stop_reason` is `budget`."""
    usage: SearchUsage = field(default_factory=SearchUsage)
    """Usage of the whole search (model, tool and verifier calls)."""

    @property
    def selection_gap(self) -> bool | None:
        """True when some candidate was correct but the selected one is not (needs an oracle)."""
        if self.coverage is None or self.best is None or self.best.correct is None:
            return None
        return self.coverage and not self.best.correct

    def summary(self) -> dict[str, Any]:
        """A JSON-able report (what a graph node writes to its state)."""
        return {
            "best": self.best.to_dict() if self.best else None,
            "stop_reason": self.stop_reason,
            "budget_kind": self.budget_kind,
            "coverage": self.coverage,
            "pass_at_k": {str(k): v for k, v in self.pass_at_k.items()},
            "candidates": len(self.candidates),
            "verified": sum(1 for c in self.candidates if c.verified),
            "nodes": len(self.tree),
            "usage": self.usage.to_dict(),
        }
