"""The constraint agent (what an instance demands, as a list) and the verification agent (a score of a
candidate against that list), shared by PlanGEN and DeCRIM."""

from __future__ import annotations

import re

from agentflow.events.kinds import ReasonConstraintsDropped, ReasonConstraintsFallback
from agentflow.graph.run.context import NodeContext
from agentflow.reasoning.llm import PROMPTS, node_ask, numbered_items
from agentflow.tools.context import DepsT

EXTRACT_SHOTS = PROMPTS.shots("extract_shots.j2", "extract.j2")
"""A worked example as an earlier turn (a small model answers the task instead of listing it without one, and
copies an example's items written into the prompt itself)."""

_WORD = re.compile(r"[a-z0-9]+")


def grounded(item: str, task: str, *, share: float = 0.6) -> bool:
    """Whether most of `item`'s words (three letters or more) occur in `task`: a requirement the task states.
    Keeps out what a small constraint agent adds of its own (a worked example's items, "mention your name")."""
    words = _words(item)
    known = set(_WORD.findall(task.lower()))
    return bool(words) and sum(w in known for w in words) >= share * len(words)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z'\"])")


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if len(w) >= 3]


def sentences(task: str) -> list[str]:
    """The task's sentences: the fallback list of requirements (an instruction states one or two per sentence)."""
    return [s.strip() for s in _SENTENCE_END.split(task.strip()) if _words(s)]


async def extract_constraints(ctx: NodeContext[DepsT], task: str, *, limit: int = 8,
                              max_tokens: int = 300) -> list[str]:
    """The constraint agent: the task's constraints as a list (at most `limit`), each grounded in the task.
    When what it kept leaves most of the task unsaid (it answered the task instead of listing it), the
    task's own sentences are the list."""
    text = await node_ask(ctx, PROMPTS.render("extract.j2", task=task), max_tokens=max_tokens,
                          purpose="constraints", shots=EXTRACT_SHOTS)
    items = numbered_items(text) or [line.strip() for line in text.splitlines() if line.strip()]
    kept = [item for item in items if grounded(item, task)]
    said = {w for item in kept for w in _words(item)}
    task_words = set(_words(task))
    covered = len(said & task_words) / max(len(task_words), 1)
    if covered < 0.6:
        ctx.emit(ReasonConstraintsFallback(covered=round(covered, 2), answer=text[:500]))
        return sentences(task)[:limit]
    if len(kept) < len(items):
        ctx.emit(ReasonConstraintsDropped(dropped=[item for item in items if item not in kept][:limit]))
    return kept[:limit]


def read_score(text: str, top: float = 10.0) -> float:
    """The last `Score: N` (else the last number) in `text`, scaled to [0, 1]; 0 without one."""
    found = re.findall(r"score\s*[:=]?\s*(-?\d+(?:\.\d+)?)", text, re.IGNORECASE) or re.findall(r"(-?\d+(?:\.\d+)?)", text)
    if not found:
        return 0.0
    return min(max(float(found[-1]) / top, 0.0), 1.0)


async def verify_against(ctx: NodeContext[DepsT], task: str, constraints: list[str], candidate: str, *,
                         max_tokens: int = 200) -> float:
    """The verification agent: the candidate's score against the constraints, in [0, 1]."""
    listed = "\n".join(f"{i}. {c}" for i, c in enumerate(constraints, 1))
    text = await node_ask(ctx, PROMPTS.render("verify.j2", task=task, constraints=listed, candidate=candidate[:4000]),
                          max_tokens=max_tokens, purpose="verify")
    return read_score(text)


__all__ = ["extract_constraints", "grounded", "read_score", "sentences", "verify_against"]
