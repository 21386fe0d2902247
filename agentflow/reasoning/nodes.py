"""Node types any workflow can use (`type: reason.select`), registered with the graph layer.

    reason.constraints  the constraint agent: the instance's constraints as a list     -> constraints
    reason.select       the selection agent: the inference algorithm for this instance  -> algorithm, selection
    reason.reward       the algorithm's reward joins the UCB statistics                 -> ucb
    reason.value        the value agent (SWE-Search): a value 0..1 and an assessment of an attempt -> value
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentflow.graph.nodetypes import NodeType
from agentflow.reasoning.constraints import extract_constraints
from agentflow.reasoning.llm import ask
from agentflow.reasoning.ucb import ALGORITHMS, UcbStats, choose_algorithm, ucb_scores
from agentflow.reasoning.value import ValueSettings, value_node


class ConstraintSettings(BaseModel):
    """Settings of `reason.constraints`."""

    model_config = ConfigDict(extra="forbid")
    input: str = "prompt"
    """State key holding the instance's text."""
    limit: int = Field(default=8, ge=1)
    """Most constraints kept."""
    max_tokens: int = Field(default=300, ge=16)
    """Longest answer of the constraint agent."""


class SelectSettings(BaseModel):
    """Settings of `reason.select`."""

    model_config = ConfigDict(extra="forbid")
    algorithms: list[str] = Field(default_factory=lambda: list(ALGORITHMS))
    """The algorithms to choose among (best_of_n, tree_of_thought, rebase)."""
    c: float = Field(default=1.0, ge=0)
    """Weight of the exploration term."""
    prior: bool = True
    """Ask the model which algorithm suits the instance; its pick gets `prior_weight` added."""
    prior_weight: float = Field(default=0.2, ge=0)
    """Bonus of the model's pick."""
    input: str = "prompt"
    """State key holding the instance's text (for the prior)."""


PRIOR = """Which way of solving this task is most likely to succeed?
A) write several complete answers and keep the best (simple tasks)
B) sketch a few approaches, keep the best ones and complete them (tasks that need a plan)
C) sketch several approaches and spend more attempts on the more promising ones (hard tasks)

Task:
{task}

Reply with one letter: A, B or C."""
_LETTERS = {"A": "best_of_n", "B": "tree_of_thought", "C": "rebase"}


async def constraints_node(state: Any, ctx: Any, settings: ConstraintSettings) -> dict[str, Any]:
    task = state.get(settings.input)
    if not task:
        raise ValueError(f"node '{ctx.node}': the state has no {settings.input!r} to extract constraints from")
    found = await extract_constraints(ctx, str(task), limit=settings.limit, max_tokens=settings.max_tokens)
    ctx.emit("reason.constraints", constraints=found)
    return {"constraints": found}


async def select_node(state: Any, ctx: Any, settings: SelectSettings) -> dict[str, Any]:
    unknown = [a for a in settings.algorithms if a not in ALGORITHMS]
    if unknown or not settings.algorithms:
        raise ValueError(f"node '{ctx.node}': unknown algorithm {unknown[0] if unknown else '(none)'} "
                         f"(choose among {', '.join(ALGORITHMS)})")
    stats = UcbStats.model_validate(state.get("ucb") or {})
    prior = None
    if settings.prior:
        answer = await ask(ctx, PRIOR.format(task=str(state.get(settings.input) or "")[:3000]), max_tokens=8,
                           purpose="select")
        match = re.search(r"\b([ABC])\b", answer.upper())
        prior = _LETTERS[match.group(1)] if match else None
    chosen = choose_algorithm(stats, settings.algorithms, c=settings.c, prior=prior,
                              prior_weight=settings.prior_weight)
    scores = ucb_scores(stats, settings.algorithms, c=settings.c, prior=prior, prior_weight=settings.prior_weight)
    selection = {"algorithm": chosen, "prior": prior,
                 "scores": {k: (None if v == float("inf") else round(v, 4)) for k, v in scores.items()}}
    ctx.emit("reason.select", **selection)
    return {"algorithm": chosen, "selection": selection, "ucb": stats.model_dump()}


async def reward_node(state: Any, ctx: Any, settings: Any) -> dict[str, Any]:
    algorithm, reward = state.get("algorithm"), state.get("reward")
    if algorithm is None or reward is None:
        raise ValueError(f"node '{ctx.node}': needs 'algorithm' and 'reward' in the state (run a search first)")
    stats = UcbStats.model_validate(state.get("ucb") or {}).update(algorithm, float(reward))
    ctx.emit("reason.reward", algorithm=algorithm, reward=reward, ucb=stats.model_dump())
    return {"ucb": stats.model_dump()}


NODE_TYPES = [
    NodeType("reason.constraints", constraints_node, ConstraintSettings, ("prompt",), ("constraints",),
             "the constraint agent: the instance's constraints as a list"),
    NodeType("reason.select", select_node, SelectSettings, ("prompt", "ucb"), ("algorithm", "selection", "ucb"),
             "the selection agent: an inference algorithm by UCB over rewards so far plus the model's prior"),
    NodeType("reason.reward", reward_node, None, ("algorithm", "reward", "ucb"), ("ucb",),
             "adds the search's reward to the chosen algorithm's UCB statistics"),
    NodeType("reason.value", value_node, ValueSettings, ("prompt", "code", "tests"), ("value",),
             "the value agent: how likely an attempt solves the task (0..1) and an assessment, from the task, "
             "the attempt and its checks (a search's `value: value.value`)"),
]

__all__ = ["NODE_TYPES"]
