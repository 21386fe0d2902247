"""The value agent (SWE-Search's value function): after an attempt is tested, a model reads the issue, the
patch and its test results and answers with a numeric value and a written assessment.

As the rollout step `swe.value` (after `swe.test`), the value becomes the attempt's search value (blended
with its tests' score by `value_weight`), so MCTS selects by it; the assessment is put in front of the
attempt's feedback, so the next expansion from that node reads it in its prompt. Candidates keep their value
and assessment (`attempts` in the state) for the final pick (`swe.discriminate`).
"""

from __future__ import annotations

from typing import Any

from agentflow.models.base import ChatModel
from agentflow.reasoning.value import ValueJudgement, read_judgement
from agentflow.repair.config import RepairConfig
from agentflow.repair.policy import RepairPolicy
from agentflow.repair.steps import ask, render
from agentflow.repair.workbench import Verification
from agentflow.search.protocols import RolloutContext
from agentflow.search.types import Action, NodeState


async def judge_attempt(model: ChatModel, cfg: RepairConfig, issue: str, patch: str, verification: Verification,
                        *, seed: int) -> ValueJudgement:
    """One call of the value agent on a tested attempt."""
    verdict = {True: "the tests pass", False: "the tests fail", None: "the tests cannot decide"}[verification.passed]
    tests = f"{verdict} (share passing: {verification.score:.2f})\n{verification.output[:2000]}".strip()
    values = {"issue": issue, "patch": patch[:3000], "tests": tests}
    text, _ = await ask(model, cfg, render(cfg, "helper_system"), render(cfg, "value", values),
                        max_tokens=min(cfg.max_tokens, 200), seed=seed, temperature=0.0)
    return read_judgement(text)


class ValuedRepairPolicy(RepairPolicy):
    """`RepairPolicy` whose attempts are valued by the value agent after their tests (the `swe.value` step)."""

    def __init__(self, *args: Any, value_cfg: RepairConfig, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.value_cfg = value_cfg
        self.judged: dict[str, ValueJudgement] = {}
        """Candidate id -> the value agent's judgement of it."""

    async def apply(self, state: NodeState, action: Action, ctx: RolloutContext) -> NodeState:
        child = await super().apply(state, action, ctx)
        verification = child.data.get("verification")
        if child.data.get("noop") or not isinstance(verification, Verification) or verification.passed is True:
            return child  # nothing new to value, or the tests decided already
        cfg, cand_id = self.value_cfg, child.data["candidate_id"]
        with self.calls.hold():  # held against the call limit with the edit samples in flight
            judgement = await judge_attempt(self.models.critic or self.models.coder, cfg, self.issue,
                                            child.data["patch"], verification,
                                            seed=cfg.seed + int(action.data.get("sample", 0)))
        ctx.usage.add_model()
        self.judged[cand_id] = judgement
        value = verification.score if judgement.value is None else judgement.value
        data = dict(child.data)
        data["value"] = round(cfg.value_weight * value + (1 - cfg.value_weight) * verification.score, 4)
        # in front of the test output: an edit prompt keeps only the feedback's first part
        shown = f" (value {round(judgement.value * 100)}/100)" if judgement.value is not None else ""
        data["feedback"] = f"A reviewer's assessment of the current change{shown}:\n{judgement.assessment}\n\n" + str(
            data.get("feedback") or "")
        child.data = data
        self.events.emit("repair.value", node_id=cand_id, instance_id=self.iid, value=judgement.value,
                         search_value=data["value"], assessment=judgement.assessment)
        return child


__all__ = ["ValueJudgement", "ValuedRepairPolicy", "judge_attempt", "read_judgement"]
