"""The value agent (SWE-Search's value function): after an attempt is tested, a model reads the issue, the
patch and its test results and answers with a numeric value and a written assessment.

As the rollout step `swe.value` (after `swe.test`, `rollout.value_node`), the value becomes the attempt's
search value (blended with its tests' score by `value_weight`), so MCTS selects by it; the assessment is put
in front of the attempt's feedback, so the next expansion from that node reads it in its prompt. Candidates keep their value
and assessment (`attempts` in the state) for the final pick (`swe.discriminate`).
"""

from __future__ import annotations

from agentflow.models.ask import ask
from agentflow.models.base import ChatModel
from agentflow.reasoning.value import ValueJudgement, read_judgement
from agentflow.repair.edit.steps import HelperCallSettings, render
from agentflow.repair.verify.workbench import Verification


async def judge_attempt(model: ChatModel, cfg: HelperCallSettings, issue: str, patch: str, verification: Verification,
                        *, seed: int) -> ValueJudgement:
    """One call of the value agent on a tested attempt."""
    verdict = {True: "the tests pass", False: "the tests fail", None: "the tests cannot decide"}[verification.passed]
    tests = f"{verdict} (share passing: {verification.score:.2f})\n{verification.output[:2000]}".strip()
    values = {"issue": issue, "patch": patch[:3000], "tests": tests}
    text = (await ask(model, render(cfg, "value", values), system=render(cfg, "helper_system"),
                      max_tokens=min(cfg.max_tokens, 200), seed=seed, temperature=0.0)).text
    return read_judgement(text)


__all__ = ["ValueJudgement", "judge_attempt", "read_judgement"]
