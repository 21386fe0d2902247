"""The value agent (SWE-Search's value function, Antoniades et al., 2024), for any task kind: a model reads the
task, an attempt at it and what checking the attempt showed, and answers with a value and an assessment
(`reason.value`; a search's `value: value.value` grows its tree where it sees progress). The repair's
`swe.value` step reads its answers with the same `read_judgement`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from pydantic import Field

from agentflow.config import StrictConfig
from agentflow.events.kinds import ReasonValue
from agentflow.graph.run.context import NodeContext
from agentflow.graph.search.tree import read_path
from agentflow.reasoning.llm import PROMPTS, node_ask
from agentflow.reasoning.state import ReasoningState, ValueRecord

_VALUE = re.compile(r"value\s*[:=]?\s*(\d{1,3}(?:\.\d+)?)", re.IGNORECASE)
_ASSESSMENT = re.compile(r"assessment\s*[:=]\s*(.*)", re.IGNORECASE | re.DOTALL)

@dataclass
class ValueJudgement:
    """The value agent's answer: `value` in [0, 1] (None when the answer named no number) and its text."""

    value: float | None
    assessment: str


def read_judgement(text: str) -> ValueJudgement:
    """`Value: N` (0-100; else the first number of the answer) and the assessment after `Assessment:` (else
    the whole answer)."""
    match = _VALUE.search(text) or re.search(r"\b(\d{1,3}(?:\.\d+)?)\b", text)
    value = min(100.0, float(match.group(1))) / 100 if match else None
    found = _ASSESSMENT.search(text)
    assessment = (found.group(1) if found else text).strip()
    return ValueJudgement(value, assessment[:1000])


class ReasonValueSettings(StrictConfig):
    """Settings of `reason.value`."""

    task: str = "prompt"
    """Dotted state path of the task the attempt is for."""
    work: str = "code"
    """Dotted state path of the attempt (code, a patch, an answer)."""
    checks: str | None = "tests"
    """Dotted state path of what checking the attempt showed (test results); None: nothing was checked."""
    output: str = "value"
    """State key the judgement is written to."""
    max_tokens: int = Field(default=200, ge=16)
    """Longest answer of the value agent."""
    limit: int = Field(default=3000, ge=200)
    """Characters of the attempt and of the checks shown (the rest is cut)."""


def _text(value: object, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, indent=1, default=str)
    return text[:limit] if text else "(none)"


async def value_node(state: ReasoningState, ctx: NodeContext[object],
                     settings: ReasonValueSettings) -> dict[str, ValueRecord]:
    """`reason.value`: the value agent's judgement of the attempt at `settings.work`, written to
    `settings.output` (`value` unless renamed, hence an update keyed by a setting, not a `ReasoningState`)."""
    checks = _text(read_path(state, settings.checks), settings.limit) if settings.checks else "(not checked)"
    prompt = PROMPTS.render("value.j2", task=_text(read_path(state, settings.task), settings.limit),
                            work=_text(read_path(state, settings.work), settings.limit), checks=checks)
    judgement = read_judgement(await node_ask(ctx, prompt, max_tokens=settings.max_tokens, purpose="value"))
    ctx.emit(ReasonValue(value=judgement.value, assessment=judgement.assessment))
    return {settings.output: {"value": judgement.value, "assessment": judgement.assessment}}


__all__ = ["ReasonValueSettings", "ValueJudgement", "read_judgement", "value_node"]
