"""Choosing the candidate to submit: tests, then what the issue's examples show, then the vote over normalised
patches, then a verifier model."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

from agentflow.budget import Budget, BudgetExceeded
from agentflow.events import EventLog
from agentflow.models.base import ChatModel
from agentflow.repair.config import RepairConfig
from agentflow.repair.policy import Attempt


async def choose(attempts: Sequence[Attempt], cfg: RepairConfig, verifier: ChatModel | None, issue: str,
                 budget: Budget, events: EventLog,
                 changed: Mapping[str, bool] | None = None, *,
                 keeps: Mapping[str, bool] | None = None) -> tuple[Attempt | None, str | None]:
    """The candidate to submit and what decided it: tests (passed, then share of tests passing), then the
    keep-working check (`keeps`: per patch, whether it still passes, see `RepairConfig.keep_check`; used only
    among candidates on which the reproduction script no longer fails, so a check asserting the bug cannot
    prefer a candidate that leaves it), then the issue's examples (`changed`: per patch, whether they show something else than on the unchanged code, see
    `spectrum.examples_changed`), then the vote (patches most samples agree on), then the verifier model's
    judgement, then the smallest patch."""
    from agentflow.search.normalize import normalise_output
    from agentflow.search.protocols import VerifyContext
    from agentflow.search.types import Candidate as SearchCandidate
    from agentflow.search.types import NodeState
    from agentflow.search.verifiers import CriticVerifier

    pool = [a for a in attempts if a.patch.strip()]
    if not pool:
        return None, None
    if len(pool) == 1:
        return pool[0], "only"

    def tests_key(a: Attempt) -> tuple[bool, float]:
        return (a.verification.passed is True, a.verification.score)

    top_key = max(tests_key(a) for a in pool)
    top = [a for a in pool if tests_key(a) == top_key]
    decided_by = "tests"
    if keeps and all(a.verification.reproduced is False for a in top):
        held = [a for a in top if keeps.get(a.patch.strip())]
        if 0 < len(held) < len(top):
            top, decided_by = held, "keep_check"
    if changed:
        moved = [a for a in top if changed.get(a.patch.strip())]
        if 0 < len(moved) < len(top):
            top, decided_by = moved, "examples"
    votes: dict[str, float] = {}
    if cfg.vote and len(top) > 1:
        keys = {a.candidate_id: normalise_output(a.patch) for a in pool}
        # a part of a split edit is no sample of its own: only the model's edits vote
        voters = [keys[a.candidate_id] for a in pool if a.part_of is None] or list(keys.values())
        share = {k: sum(1 for v in voters if v == k) / len(voters) for k in keys.values()}
        votes = {a.candidate_id: share[keys[a.candidate_id]] for a in top}
        if len(set(votes.values())) > 1:
            decided_by = "vote"
    judged: dict[str, float] = {}
    if verifier is not None and len(top) > 1:
        best_vote = max(votes.values(), default=0.0)
        finalists = [a for a in top if votes.get(a.candidate_id, 0.0) == best_vote][:4]
        if len(finalists) > 1:
            critic = CriticVerifier(verifier, task=issue)
            cands = [SearchCandidate(a.candidate_id, NodeState(done=True, output=a.patch)) for a in finalists]
            with contextlib.suppress(BudgetExceeded):
                results = await critic.verify(cands, VerifyContext(budget=budget, events=events))
                judged = {c.node_id: r.score for c, r in zip(cands, results, strict=True)}
                if len(set(judged.values())) > 1:
                    decided_by = "verifier"
    best = max(top, key=lambda a: (votes.get(a.candidate_id, 0.0), judged.get(a.candidate_id, 0.0),
                                   -len(a.patch), -a.sample))
    return best, decided_by
