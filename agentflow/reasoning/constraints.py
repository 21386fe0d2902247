"""The constraint agent (what an instance demands, as a list) and the verification agent (a score of a
candidate against that list), shared by PlanGEN and DeCRIM."""

from __future__ import annotations

import re
from typing import Any

from agentflow.reasoning.llm import ask, numbered_items

EXTRACT = """List the requirements the task below states: what the answer must contain or avoid, its format, \
its length, how it must start or end. Only what the task itself asks, each in the task's own words, one per \
line, numbered; add none of your own. No other text.

Example task: Describe the sea in at most 30 words. Mention the word 'salt' and end with 'Goodbye.'
Example list:
1. At most 30 words.
2. Mention the word 'salt'.
3. End with 'Goodbye.'

Task:
{task}
"""

VERIFY = """Task:
{task}

Constraints:
{constraints}

Candidate answer:
{candidate}

How well does the candidate satisfy the constraints? Give a score from 0 (none) to 10 (all, fully), as \
`Score: N` on the last line."""


async def extract_constraints(ctx: Any, task: str, *, limit: int = 8, max_tokens: int = 300) -> list[str]:
    """The constraint agent: the task's constraints as a list (at most `limit`)."""
    text = await ask(ctx, EXTRACT.format(task=task), max_tokens=max_tokens, purpose="constraints")
    items = numbered_items(text) or [line.strip() for line in text.splitlines() if line.strip()]
    return items[:limit]


def read_score(text: str, top: float = 10.0) -> float:
    """The last `Score: N` (else the last number) in `text`, scaled to [0, 1]; 0 without one."""
    found = re.findall(r"score\s*[:=]?\s*(-?\d+(?:\.\d+)?)", text, re.IGNORECASE) or re.findall(r"(-?\d+(?:\.\d+)?)", text)
    if not found:
        return 0.0
    return min(max(float(found[-1]) / top, 0.0), 1.0)


async def verify_against(ctx: Any, task: str, constraints: list[str], candidate: str, *,
                         max_tokens: int = 200) -> float:
    """The verification agent: the candidate's score against the constraints, in [0, 1]."""
    listed = "\n".join(f"{i}. {c}" for i, c in enumerate(constraints, 1)) or "(none listed: judge by the task)"
    text = await ask(ctx, VERIFY.format(task=task, constraints=listed, candidate=candidate[:4000]),
                     max_tokens=max_tokens, purpose="verify")
    return read_score(text)


__all__ = ["extract_constraints", "read_score", "verify_against"]
