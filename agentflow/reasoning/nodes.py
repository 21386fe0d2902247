"""Node types any workflow can use (`type: reason.select`; the list is `NODE_TYPES`).

`algorithm` names a graph search's strategy (`strategy_key: algorithm`), and `reason.reward` reads the reward
the search chose (`value: search.value`): PlanGEN is a workflow of these around a search
(`workflows/plangen.yaml`). Each node is `async (state, ctx: NodeContext[object], settings) -> update`: it
reads only the run's handles (`ctx.run`), so it runs in any workflow (README.md).
"""

from __future__ import annotations

import re
from typing import Any, cast

from pydantic import Field

from agentflow.config import StrictConfig
from agentflow.events.kinds import ReasonConstraints, ReasonReward, ReasonSelect, ReasonVerify
from agentflow.graph.compile.nodetypes import NodeType
from agentflow.graph.run.context import NodeContext
from agentflow.graph.search.tree import read_path
from agentflow.reasoning.constraints import extract_constraints, verify_against
from agentflow.reasoning.llm import PROMPTS, node_ask
from agentflow.reasoning.state import (
    AlgorithmKeys,
    CodeKeys,
    ConstraintKeys,
    PromptKeys,
    ReasoningState,
    ResponseKeys,
    RewardKeys,
    ScoreRecord,
    SelectionRecord,
    TestKeys,
    UcbKeys,
    UcbRecord,
    ValueKeys,
    VerifiedKeys,
)
from agentflow.reasoning.ucb import ALGORITHMS, KNOWN_ALGORITHMS, UcbStats, choose_algorithm, ucb_scores
from agentflow.reasoning.value import ReasonValueSettings, value_node


class ConstraintSettings(StrictConfig):
    """Settings of `reason.constraints`."""

    input: str = "prompt"
    """State key holding the instance's text."""
    limit: int = Field(default=8, ge=1)
    """Most constraints kept."""
    max_tokens: int = Field(default=300, ge=16)
    """Longest answer of the constraint agent."""


class SelectSettings(StrictConfig):
    """Settings of `reason.select`."""

    algorithms: list[str] = Field(default_factory=lambda: list(ALGORITHMS))
    """The algorithms to choose among (best_of_n, tree_of_thought, rebase; mcts too, with a search whose `n`
    lets it finish a branch)."""
    c: float = Field(default=1.0, ge=0)
    """Weight of the exploration term."""
    prior: bool = True
    """Ask the model which algorithm suits the instance; its pick gets `prior_weight` added."""
    prior_weight: float = Field(default=0.2, ge=0)
    """Bonus of the model's pick."""
    input: str = "prompt"
    """State key holding the instance's text (for the prior)."""


class VerifySettings(StrictConfig):
    """Settings of `reason.verify`."""

    work: str = "response"
    """Dotted state path of what is scored (a plan, code, an answer)."""
    task: str = "prompt"
    """Dotted state path of the task."""
    constraints: str = "constraints"
    """Dotted state path of the constraint list (none there: judged by the task alone)."""
    output: str = "verified"
    """State key the score is written to, as `{score: 0..1}` (a search's `value:` reads such a dict)."""
    max_tokens: int = Field(default=200, ge=16)
    """Longest answer of the verification agent."""


class ReasonRewardSettings(StrictConfig):
    """Settings of `reason.reward`."""

    value: str = "reward"
    """Dotted state path of the reward to add, in [0, 1] (after a search: `search.value`, the chosen branch's)."""


_LETTERS = {"A": "best_of_n", "B": "tree_of_thought", "C": "rebase"}


async def constraints_node(state: ReasoningState, ctx: NodeContext[object],
                           settings: ConstraintSettings) -> ReasoningState:
    task = state.get(settings.input)
    if not task:
        raise ValueError(f"node '{ctx.node}': the state has no {settings.input!r} to extract constraints from")
    found = await extract_constraints(ctx, str(task), limit=settings.limit, max_tokens=settings.max_tokens)
    ctx.emit(ReasonConstraints(constraints=found))
    return {"constraints": found}


async def select_node(state: ReasoningState, ctx: NodeContext[object], settings: SelectSettings) -> ReasoningState:
    unknown = [a for a in settings.algorithms if a not in KNOWN_ALGORITHMS]
    if unknown or not settings.algorithms:
        raise ValueError(f"node '{ctx.node}': unknown algorithm {unknown[0] if unknown else '(none)'} "
                         f"(choose among {', '.join(KNOWN_ALGORITHMS)})")
    stats = UcbStats.model_validate(state.get("ucb") or {})
    prior = None
    if settings.prior:
        answer = await node_ask(ctx, PROMPTS.render("prior.j2", task=str(state.get(settings.input) or "")[:3000]), max_tokens=8,
                                purpose="select")
        match = re.search(r"\b([ABC])\b", answer.upper())
        prior = _LETTERS[match.group(1)] if match else None
    chosen = choose_algorithm(stats, settings.algorithms, c=settings.c, prior=prior,
                              prior_weight=settings.prior_weight)
    scores = ucb_scores(stats, settings.algorithms, c=settings.c, prior=prior, prior_weight=settings.prior_weight)
    selection: SelectionRecord = {
        "algorithm": chosen, "prior": prior,
        "scores": {k: (None if v == float("inf") else round(v, 4)) for k, v in scores.items()}}
    ctx.emit(ReasonSelect(**selection))
    return {"algorithm": chosen, "selection": selection, "ucb": cast(UcbRecord, stats.model_dump())}


async def verify_node(state: ReasoningState, ctx: NodeContext[object],
                      settings: VerifySettings) -> dict[str, ScoreRecord]:
    work = read_path(state, settings.work)
    if work is None:
        raise ValueError(f"node '{ctx.node}': the state has nothing at {settings.work!r} to verify")
    constraints = [str(c) for c in read_path(state, settings.constraints) or []]
    score = await verify_against(ctx, str(read_path(state, settings.task) or ""), constraints, str(work))
    ctx.emit(ReasonVerify(work=settings.work, score=score))
    return {settings.output: {"score": score}}


async def reward_node(state: ReasoningState, ctx: NodeContext[object], settings: ReasonRewardSettings) -> ReasoningState:
    algorithm, reward = state.get("algorithm"), read_path(state, settings.value)
    if algorithm is None or not isinstance(reward, (int, float)):
        raise ValueError(f"node '{ctx.node}': needs 'algorithm' and a number at {settings.value!r} in the state "
                         "(run a search first)")
    stats = UcbStats.model_validate(state.get("ucb") or {}).update(algorithm, float(reward))
    ctx.emit(ReasonReward(algorithm=algorithm, reward=reward, ucb=stats.model_dump()))
    return {"ucb": cast(UcbRecord, stats.model_dump()), "reward": float(reward)}


def begin(state: ReasoningState) -> ReasoningState:
    """Writes nothing: the first node of a subgraph whose route picks where a branch really starts."""
    return {}


NODE_TYPES: list[NodeType[ReasoningState, object, Any]] = [
    NodeType("reason.constraints", constraints_node, ConstraintSettings, (PromptKeys,), (ConstraintKeys,),
             "the constraint agent: the instance's constraints as a list", state=ReasoningState),
    NodeType("reason.select", select_node, SelectSettings, (PromptKeys, UcbKeys), (AlgorithmKeys, UcbKeys),
             "the selection agent: an inference algorithm by UCB over rewards so far plus the model's prior",
             state=ReasoningState),
    NodeType("reason.verify", verify_node, VerifySettings, (PromptKeys, ConstraintKeys, ResponseKeys),
             (VerifiedKeys,),
             "the verification agent: a 0..1 score of a plan or an answer against the constraints",
             state=ReasoningState),
    NodeType("reason.reward", reward_node, ReasonRewardSettings, (AlgorithmKeys, RewardKeys, UcbKeys),
             (UcbKeys, RewardKeys),
             "adds the search's reward to the chosen algorithm's UCB statistics", state=ReasoningState),
    NodeType("reason.value", value_node, ReasonValueSettings, (PromptKeys, CodeKeys, TestKeys), (ValueKeys,),
             "the value agent: how likely an attempt solves the task (0..1) and an assessment, from the task, "
             "the attempt and its checks (a search's `value: value.value`)", state=ReasoningState),
]

__all__ = ["NODE_TYPES", "begin"]
