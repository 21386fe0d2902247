"""The verifier model's judgement of a patch (`--verifier-model`): a structured score with its evidence, used by
`choose` to split finalists the tests and the vote leave tied. It cannot decide correctness; a judge that
fails scores 0."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from agentflow.budget import Budget
from agentflow.errors import AgentflowError
from agentflow.models.base import ChatModel, ChatRequest, Message

INSTRUCTIONS = (
    "You review the work of a coding agent. Judge whether it solves the task. Reply with a JSON object: "
    '{"score": <0..1>, "evidence": ["<observation>", ...], "summary": "<one sentence>"}. '
    "Base the score on evidence you can point to."
)
MAX_CHARS = 12_000
"""Most characters of a patch shown; a longer one keeps its start and its end."""


class Judgement(BaseModel):
    """The verifier's structured judgement of one patch."""

    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)

    score: float = Field(ge=0.0, le=1.0)
    """How likely the work solves the task, from 0 (surely not) to 1 (surely)."""
    evidence: list[str] = Field(min_length=1)
    """Concrete observations behind the score (lines of the patch, test output, reasoning steps)."""
    summary: str = ""
    """The judgement in one sentence."""


def request(issue: str, patch: str) -> ChatRequest:
    work = patch or "(no output)"
    if len(work) > MAX_CHARS:
        work = work[: MAX_CHARS // 2] + "\n...[cut]...\n" + work[-MAX_CHARS // 2 :]
    return ChatRequest(messages=[Message.system(INSTRUCTIONS),
                                 Message.user(f"Task:\n{issue}\n\nFinal output of the agent:\n{work}")],
                       temperature=0.0)


async def judge_patch(model: ChatModel, issue: str, patch: str, budget: Budget | None = None) -> float:
    """The verifier's score of `patch` for `issue` (0 when it fails). A model that does not charge the budget
    itself (not an `InstrumentedModel`) is held against `budget` here."""
    from agentflow.models.instrumented import InstrumentedModel
    from agentflow.models.structured import chat_structured

    req = request(issue, patch)
    try:
        if budget is None or isinstance(model, InstrumentedModel):
            judgement, _ = await chat_structured(model, req, Judgement)
        else:
            with budget.model_call(req.max_tokens) as hold:
                async with budget.deadline():
                    judgement, response = await chat_structured(model, req, Judgement)
                hold.charge_model(tokens=response.usage.total_tokens, usd=response.usage.cost_usd)
    except AgentflowError:
        return 0.0
    return judgement.score


async def judge_patches(model: ChatModel, issue: str, patches: Mapping[str, str],
                        budget: Budget | None = None) -> dict[str, float]:
    """Candidate id -> the verifier's score of its patch, judged at once."""
    ids: Sequence[str] = list(patches)
    scores = await asyncio.gather(*(judge_patch(model, issue, patches[i], budget) for i in ids))
    return dict(zip(ids, scores, strict=True))


__all__ = ["INSTRUCTIONS", "Judgement", "judge_patch", "judge_patches", "request"]
