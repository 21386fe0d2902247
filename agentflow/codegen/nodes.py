"""Code-generation node types (`type: codegen.write`; the list is `NODE_TYPES`), shaped as the `reason.*`
nodes are (`agentflow.reasoning.nodes`), with `CodeGenState`.

The state holds `prompt` (signature and docstring) and optionally `entry_point`; the examples a node may use
are parsed from the prompt. Hidden tests are never part of a workflow's state.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field

from agentflow.codegen.execute import run_examples
from agentflow.codegen.state import (
    CodeGenState,
    CodeScoreKeys,
    DebugRoundKeys,
    EntryPointKeys,
    ExampleKeys,
    ExamplesRecord,
    PlanRoundKeys,
    RewardRecord,
    SimulationKeys,
)
from agentflow.codegen.task import CodeTask, make_task
from agentflow.config import StrictConfig
from agentflow.events.kinds import CodegenReward, CodegenSimulate, CodegenTest
from agentflow.graph.compile.nodetypes import NodeType
from agentflow.graph.run.context import NodeContext
from agentflow.graph.search.tree import read_path
from agentflow.models.ask import code_block
from agentflow.models.templates import package_templates
from agentflow.reasoning.llm import SamplingSettings, node_ask, sampling
from agentflow.reasoning.state import CodeKeys, PlanKeys, PromptKeys, VerifiedKeys

PROMPTS = package_templates(__file__)
"""The prompts of the code-generation node types (`prompts/*.j2`: short and concrete, so a 1.5B model follows them)."""
SYSTEM = PROMPTS.render("system.j2")


def task_of(state: CodeGenState) -> CodeTask:
    """The task of the state's `prompt` and `entry_point` (the examples parsed from the prompt)."""
    prompt = state.get("prompt")
    if not prompt:
        raise ValueError("the state has no 'prompt' (give --input '{\"prompt\": \"def f(...): ...\"}')")
    return make_task(prompt, state.get("entry_point") or None)


def code_of(answer: str, entry_point: str) -> str:
    """The code in a model's answer: its python block, else the answer itself when it defines the function."""
    block = code_block(answer)
    if block is not None:
        return block
    return answer if re.search(rf"def\s+{re.escape(entry_point)}\s*\(", answer) else answer.strip()


def _failures(state: CodeGenState) -> list[str]:
    """The failing examples of the last test run, described (none before one)."""
    tests = state.get("tests")
    return list(tests.get("failures") or []) if tests else []


def _trace(state: CodeGenState) -> str:
    """The last simulation's trace ('' before one)."""
    sim = state.get("simulation")
    return sim.get("trace", "") if sim else ""


class CodeGenSettings(SamplingSettings):
    """Settings shared by the model-calling node types."""

    max_tokens: int = Field(default=512, ge=16)
    """Longest answer."""


class SimulateSettings(CodeGenSettings):
    target: Literal["plan", "code"] = "plan"
    """What to simulate: the plan on the examples, or the code on its first failing example."""
    examples: int = Field(default=3, ge=1)
    """Most examples put in a plan simulation."""


class CodegenRewardSettings(StrictConfig):
    """Settings of `codegen.reward`."""

    examples_weight: float = Field(default=0.8, ge=0, le=1)
    """Share of the reward from the examples passing while one fails (the rest: the verification agent's score)."""
    tests: str = "tests"
    """Dotted state path of the examples' results (`codegen.test`'s `tests`)."""
    verified: str | None = "verified"
    """Dotted state path of the verification agent's score (`reason.verify`'s output); None: the examples alone."""
    output: str = "score"
    """State key the reward is written to, as `{score, examples, verifier}` (a search's `value:` reads it)."""


class CodegenTestSettings(StrictConfig):
    timeout: float = Field(default=10.0, gt=0)
    """Seconds per example."""


async def _ask(ctx: NodeContext[object], settings: CodeGenSettings, template: str, purpose: str, *,
               sampled: bool = False, **values: Any) -> str:
    """The answer to prompt `template` filled with `values`, under the system prompt: sampled as a search
    branch (`sampling`) when `sampled`, else at `settings.temperature`."""
    temperature, seed = sampling(ctx, settings) if sampled else (settings.temperature, None)
    return await node_ask(ctx, PROMPTS.render(template, **values), system=SYSTEM, temperature=temperature,
                          seed=seed, max_tokens=settings.max_tokens, purpose=purpose)


async def plan(state: CodeGenState, ctx: NodeContext[object], settings: CodeGenSettings) -> CodeGenState:
    task = task_of(state)
    sim = state.get("simulation")
    rounds = int(state.get("plan_rounds") or 0)
    if state.get("plan") and sim and sim.get("target") == "plan" and sim.get("verdict") == "disagree":
        text = await _ask(ctx, settings, "revise_plan.j2", "revise plan", prompt=task.prompt,
                          plan=state["plan"], trace=_trace(state))
        return {"plan": text.strip(), "plan_rounds": rounds + 1}
    text = await _ask(ctx, settings, "plan.j2", "plan", sampled=True, prompt=task.prompt)
    return {"plan": text.strip(), "plan_rounds": rounds}


def _verdict(trace: str) -> Literal["agree", "disagree"]:
    found = re.findall(r"VERDICT\s*:\s*\**\s*(MATCH|MISMATCH)", trace, re.IGNORECASE)
    return "agree" if found and found[-1].upper() == "MATCH" else "disagree"


async def simulate(state: CodeGenState, ctx: NodeContext[object], settings: SimulateSettings) -> CodeGenState:
    task = task_of(state)
    if settings.target == "plan":
        if not task.examples:
            return {"simulation": {"target": "plan", "verdict": "agree", "trace": "(no examples to simulate)"}}
        examples = "\n".join(f"{e.call} -> {e.expected}" for e in task.examples[:settings.examples])
        trace = await _ask(ctx, settings, "simulate_plan.j2", "simulate plan", prompt=task.prompt,
                           plan=state.get("plan") or "", examples=examples)
        verdict = _verdict(trace)
        ctx.emit(CodegenSimulate(target="plan", verdict=verdict))
        return {"simulation": {"target": "plan", "verdict": verdict, "trace": trace.strip()}}
    failures = _failures(state)
    if not failures:
        return {"simulation": {"target": "code", "verdict": "agree", "trace": "(no failing example)"}}
    trace = await _ask(ctx, settings, "simulate_code.j2", "simulate failing case",
                       code=state.get("code") or "", failure=failures[0])
    ctx.emit(CodegenSimulate(target="code", failure=failures[0]))
    return {"simulation": {"target": "code", "verdict": "disagree", "trace": trace.strip()}}


async def write(state: CodeGenState, ctx: NodeContext[object], settings: CodeGenSettings) -> CodeGenState:
    task = task_of(state)
    given = PROMPTS.render("plan_given.j2", plan=state["plan"]) if state.get("plan") else ""
    answer = await _ask(ctx, settings, "write.j2", "write code", sampled=True, prompt=task.prompt, plan=given)
    return {"code": code_of(answer, task.entry_point)}


async def test(state: CodeGenState, ctx: NodeContext[object], settings: CodegenTestSettings) -> CodeGenState:
    task = task_of(state)
    report = await run_examples(ctx.run.sandbox, task, state.get("code") or "", timeout=settings.timeout)
    summary = report.summary()
    tests: ExamplesRecord = {**summary, "ok": not summary["failures"]}  # no examples: nothing left to check
    ctx.emit(CodegenTest(passed=report.passed, total=report.total))
    return {"tests": tests}


async def debug(state: CodeGenState, ctx: NodeContext[object], settings: CodeGenSettings) -> CodeGenState:
    task = task_of(state)
    answer = await _ask(ctx, settings, "debug.j2", "debug", prompt=task.prompt, code=state.get("code") or "",
                        failures="\n".join(_failures(state)), trace=_trace(state))
    return {"code": code_of(answer, task.entry_point), "debug_rounds": int(state.get("debug_rounds") or 0) + 1}


def _score(raw: object) -> float | None:
    if isinstance(raw, dict):
        raw = raw.get("score")
    return float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else None


async def reward(state: CodeGenState, ctx: NodeContext[object],
                 settings: CodegenRewardSettings) -> dict[str, RewardRecord]:
    tests = read_path(state, settings.tests) or {}
    verified = _score(read_path(state, settings.verified)) if settings.verified else None
    passed, total = int(tests.get("passed") or 0), int(tests.get("total") or 0)
    share: float | None = None
    if total:
        share = fraction = passed / total
        w = settings.examples_weight
        blended = fraction if verified is None else w * fraction + (1 - w) * verified
        # every example passing is the only reward of 1 (a search's `stop_at: 1.0` ends there); below that the
        # verifier's score blends in, and a blend cannot reach 1 while an example fails
        value = 1.0 if passed == total else min(blended, 0.999)
    else:
        value = verified if verified is not None else 0.0
    ctx.emit(CodegenReward(examples=share, verifier=verified, reward=round(value, 4)))
    return {settings.output: {"score": round(value, 4), "examples": share, "verifier": verified}}


NODE_TYPES: list[NodeType[CodeGenState, object, Any]] = [
    NodeType("codegen.plan", plan, CodeGenSettings, (PromptKeys, EntryPointKeys, PlanKeys, SimulationKeys, PlanRoundKeys),
             (PlanKeys, PlanRoundKeys),
             "a plan for the function; after a disagreeing simulation, the plan revised with its trace",
             state=CodeGenState),
    NodeType("codegen.simulate", simulate, SimulateSettings, (PromptKeys, EntryPointKeys, PlanKeys, CodeKeys, ExampleKeys),
             (SimulationKeys,),
             "simulates the plan on the examples, or the code on a failing example, step by step", state=CodeGenState),
    NodeType("codegen.write", write, CodeGenSettings, (PromptKeys, EntryPointKeys, PlanKeys),
             (CodeKeys,), "writes the function (following the plan)",
             state=CodeGenState),
    NodeType("codegen.test", test, CodegenTestSettings, (PromptKeys, EntryPointKeys, CodeKeys), (ExampleKeys,),
             "runs the prompt's examples on the code in the sandbox", sandbox=True, state=CodeGenState),
    NodeType("codegen.debug", debug, CodeGenSettings, (PromptKeys, EntryPointKeys, CodeKeys, ExampleKeys, SimulationKeys, DebugRoundKeys),
             (CodeKeys, DebugRoundKeys),
             "fixes the code from the failing examples and the simulation's trace", state=CodeGenState),
    NodeType("codegen.reward", reward, CodegenRewardSettings, (ExampleKeys, VerifiedKeys), (CodeScoreKeys,),
             "a candidate's reward: the share of examples passing (1 only when all do), the verifier's score blended in",
             state=CodeGenState),
]

__all__ = ["NODE_TYPES", "code_of", "task_of"]
