"""Simulated policies whose success probability is known: for algorithm tests, examples and benchmarks.

`SimulatedPolicy`: a task solved by `steps` correct choices in a row; each sampled step is correct with
probability `p`. `progress(state)` (share of leading correct steps) plays the role of a test suite that
passes one more test per correct step. `SimulatedAnswerPolicy`: one-shot answers, right with probability `p`,
wrong answers either spread over many values or clustered on one (for majority-vote tests).
"""

from __future__ import annotations

import asyncio
from typing import Literal

from agentflow.models.base import Usage
from agentflow.search.protocols import RolloutContext, StepPolicy
from agentflow.search.types import Action, Candidate, NodeState, Verification
from agentflow.search.verifiers import FunctionVerifier


class SimulatedPolicy(StepPolicy):
    """Step i is option 0 when correct, 1..options-1 when wrong. Every sample counts as one model call unless
    `calls_per_proposal='call'` (one call with n=k)."""

    def __init__(
        self,
        *,
        steps: int = 4,
        p: float = 0.5,
        options: int = 4,
        calls_per_proposal: Literal["sample", "call"] = "sample",
        tokens_per_call: int = 100,
        latency_s: float = 0.0,
        tool_calls_per_step: int = 0,
    ) -> None:
        if options < 2:
            raise ValueError("SimulatedPolicy needs at least 2 options")
        self.steps = steps
        self.p = p
        self.options = options
        self.calls_per_proposal = calls_per_proposal
        self.tokens_per_call = tokens_per_call
        self.latency_s = latency_s
        self.tool_calls_per_step = tool_calls_per_step
        self.max_steps = steps

    async def propose(self, state: NodeState, k: int, ctx: RolloutContext) -> list[Action]:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        calls = k if self.calls_per_proposal == "sample" else 1
        ctx.charge_model(Usage(input_tokens=self.tokens_per_call * calls // 2,
                               output_tokens=self.tokens_per_call * calls // 2, cost_usd=0.001 * calls), calls=calls)
        actions = []
        for _ in range(k):
            option = 0 if ctx.rng.random() < self.p else ctx.rng.randrange(1, self.options)
            actions.append(Action(text=f"choose {option}", prior=self.p if option == 0 else 1 - self.p,
                                  data={"option": option}))
        return actions

    async def apply(self, state: NodeState, action: Action, ctx: RolloutContext) -> NodeState:
        if self.tool_calls_per_step:
            ctx.charge_tool(self.tool_calls_per_step)
        choices = (*state.data.get("choices", ()), action.data["option"])
        done = len(choices) >= self.steps
        return state.child(data={"choices": choices}, done=done,
                           output="answer " + " ".join(map(str, choices)) if done else None)

    def is_correct(self, state: NodeState) -> bool:
        choices = state.data.get("choices", ())
        return len(choices) == self.steps and all(c == 0 for c in choices)

    def progress(self, state: NodeState) -> float:
        """Share of the task's steps solved by the leading correct choices (a test per step)."""
        solved = 0
        for c in state.data.get("choices", ()):
            if c != 0:
                break
            solved += 1
        return solved / self.steps

    def oracle(self, cand: Candidate) -> bool:
        return self.is_correct(cand.state)

    def perfect_verifier(self) -> FunctionVerifier:
        """Passes exactly the correct finished rollouts."""
        return FunctionVerifier(self.oracle, name="perfect")

    def test_verifier(self) -> FunctionVerifier:
        """Like a test suite with one test per step: score = progress, passed = all steps correct."""

        def check(cand: Candidate) -> Verification:
            score = self.progress(cand.state)
            return Verification(score=score, passed=self.is_correct(cand.state) if cand.state.done else None)

        return FunctionVerifier(check, name="tests")


class SimulatedAnswerPolicy(StepPolicy):
    """One step: answer `correct` with probability p, else a wrong answer that is `spread` (one of
    `wrong_values` distinct values) or `clustered` (always the same wrong value)."""

    def __init__(self, *, p: float = 0.4, wrong: Literal["spread", "clustered"] = "spread",
                 wrong_values: int = 1000, correct: str = "42") -> None:
        self.p = p
        self.wrong = wrong
        self.wrong_values = wrong_values
        self.correct = correct
        self.max_steps = 1

    async def propose(self, state: NodeState, k: int, ctx: RolloutContext) -> list[Action]:
        ctx.charge_model(Usage(input_tokens=10, output_tokens=2), calls=k)
        out = []
        for _ in range(k):
            if ctx.rng.random() < self.p:
                answer = self.correct
            elif self.wrong == "clustered":
                answer = "-1"
            else:
                answer = str(1000 + ctx.rng.randrange(self.wrong_values))
            out.append(Action(text=answer))
        return out

    async def apply(self, state: NodeState, action: Action, ctx: RolloutContext) -> NodeState:
        return state.child(done=True, output=action.text)

    def oracle(self, cand: Candidate) -> bool:
        return cand.output == self.correct
