"""The discriminator (SWE-Search's final pick; `docs/workflows/swe_search.md`), node type `swe.discriminate` in
place of `swe.choose`: agents argue in turn over the finalists (`nodekit.may_fix`), each reading the arguments
before it, and a judge decides; when the debate cannot finish, the first finalist is submitted (`value`).
"""

from __future__ import annotations

import re
from collections import Counter

from pydantic import Field

from agentflow.budget import BudgetExceeded
from agentflow.errors import ModelError
from agentflow.events.kinds import RepairDiscriminate
from agentflow.graph.run.context import NodeContext
from agentflow.models.base import ChatModel
from agentflow.repair.edit.steps import ask_helper
from agentflow.repair.nodetypes.nodekit import declined, emit, may_fix, submit
from agentflow.repair.nodetypes.runtime import FinalistSettings, HelperSettings, RepairRuntime
from agentflow.repair.nodetypes.state import RepairState
from agentflow.repair.outcome import Candidate
from agentflow.swe.normalize import normalise_output


class DiscriminateSettings(FinalistSettings, HelperSettings):
    """Settings of the swe.discriminate node type."""

    debaters: int = Field(default=2, ge=1, le=6)
    """Agents that argue in turn over the finalists before the judge decides."""


def finalists(attempts: list[Candidate], limit: int) -> list[Candidate]:
    """The best `limit` distinct patches (normalised): passing tests first, then value, then tests' score."""
    def key(a: Candidate) -> tuple[bool, float, float]:
        v = a.verified
        return v.passed is True, v.score if a.value is None else a.value, v.score

    seen: set[str] = set()
    out: list[Candidate] = []
    for a in sorted((a for a in attempts if a.patch.strip()), key=key, reverse=True):  # stable: earlier first
        norm = normalise_output(a.patch)
        if norm not in seen:
            seen.add(norm)
            out.append(a)
    return out[:limit]


def describe(finals: list[Candidate]) -> str:
    """The finalists as numbered patches with what their tests (and a value agent) said."""
    parts = []
    for number, a in enumerate(finals, 1):
        v = a.verified
        tests = {True: "pass", False: "fail", None: "do not decide"}[v.passed]
        line = f"[{number}] tests {tests} (share passing {v.score:.2f})"
        if a.assessment:
            line += f"; a reviewer said: {a.assessment[:300]}"
        parts.append(f"{line}\n```diff\n{a.patch[:2500]}```")
    return "\n\n".join(parts)


def picked(text: str, label: str, count: int) -> int | None:
    """The finalist number (1-based) after the last `label:` in an answer, if it names one."""
    found = [int(n) for n in re.findall(rf"{label}\s*[:=]?\s*\[?(\d+)", text, re.IGNORECASE)]
    return found[-1] if found and 1 <= found[-1] <= count else None


async def debate(model: ChatModel, cfg: DiscriminateSettings, issue: str,
                 finals: list[Candidate]) -> tuple[int | None, list[str], str]:
    """(the judge's pick or else the debaters' majority, 1-based or None; the arguments; what decided)."""
    shown = describe(finals)
    arguments: list[str] = []
    votes: list[int] = []

    def so_far() -> str:
        return "".join(f"\nArgument {i}:\n{a}\n" for i, a in enumerate(arguments, 1))

    for agent in range(cfg.debaters):
        values = {"issue": issue, "finalists": shown, "arguments": so_far()}
        text = await ask_helper(model, cfg, "argue", values, max_tokens=min(cfg.max_tokens, 256), seed=cfg.seed + agent)
        arguments.append(text.strip()[:1200])
        if (best := picked(text, "best", len(finals))) is not None:
            votes.append(best)
    values = {"issue": issue, "finalists": shown, "arguments": so_far()}
    text = await ask_helper(model, cfg, "judge", values, max_tokens=min(cfg.max_tokens, 128), seed=cfg.seed)
    arguments.append("Judge: " + text.strip()[:600])
    if (choice := picked(text, "choice", len(finals))) is not None:
        return choice, arguments, "discriminator"
    if votes:
        return Counter(votes).most_common(1)[0][0], arguments, "debate"
    return None, arguments, "value"


async def discriminate_node(state: RepairState, ctx: NodeContext[RepairRuntime], settings: DiscriminateSettings) -> RepairState:
    rt = ctx.deps
    attempts, noops = await may_fix(rt, state)
    if attempts is None:
        return declined("noop")
    finals = finalists(attempts, settings.finalists)
    if not finals:
        return {"chosen": None}
    arguments: list[str] = []
    pick, chosen_by, error = 1, "only", None
    if len(finals) > 1:
        try:
            number, arguments, chosen_by = await debate(rt.models.verifier or rt.models.coder, settings, rt.issue,
                                                        finals)
            pick = number or 1
        except (BudgetExceeded, ModelError) as exc:  # the best finalist by value stands; the event says why
            chosen_by, error = "value", f"{type(exc).__name__}: {exc}"
    best = finals[pick - 1]
    emit(rt, RepairDiscriminate(finalists=[a.candidate_id for a in finals], chosen=best.candidate_id,
                                chosen_by=chosen_by, arguments=arguments, error=error))
    return await submit(rt, state, best, chosen_by, noops=noops)


__all__ = ["DiscriminateSettings", "debate", "describe", "discriminate_node", "finalists", "picked"]
