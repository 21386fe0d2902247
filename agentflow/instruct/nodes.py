"""Instruction-following node types (`type: instruct.critic`), registered with the graph layer.

    instruct.respond  answer the prompt                                                -> response
    instruct.critic   DeCRIM's critic: each constraint checked; one checkable by code is
                      checked by a function the critic writes, run in the sandbox
                      ("strong feedback"), the others judged by the model; of several
                      refinements the best is kept, and one worse than the best
                      answer so far gives way to it                       -> response, critique, all_pass, checks, best
    instruct.refine   new answers that avoid the failed constraints (several samples;
                      the critic keeps the one that meets most)                        -> refinements, rounds
    instruct.search   PlanGEN's search over outlines and responses, scored by the
                      verification agent against the constraints                        -> response, reward, candidates

The benchmark's own checkers (`agentflow.instruct.checks`) are never used here: the critic sees only the
constraint text the decomposition produced.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentflow.codegen.execute import run_predicate
from agentflow.graph.nodetypes import NodeType
from agentflow.reasoning.algorithms import run_algorithm
from agentflow.reasoning.constraints import verify_against
from agentflow.reasoning.llm import ask, code_block

RESPOND = "{prompt}"

CRITIC = """Constraint: {constraint}

Can this constraint be checked exactly by a short Python function of the response text (word or sentence \
counts, required or forbidden words or characters, bullet points, JSON, how it starts or ends)?
- If yes: reply only with a ```python block defining `def check(response: str)` that returns True when the \
constraint holds, and otherwise a short string saying what is wrong, with what it found.
- If not: read the response below and reply `PASS` or `FAIL: <the reason>`.

Response:
{response}"""

_SHOT_RESPONSE = "The sea is wide and deep, and its waves never stop moving."
CRITIC_SHOTS = [
    (CRITIC.format(constraint="Use a calm tone.", response=_SHOT_RESPONSE), "PASS"),
    (CRITIC.format(constraint="At most 8 words.", response=_SHOT_RESPONSE),
     ("```python\ndef check(response: str):\n    n = len(response.split())\n"
      "    return True if n <= 8 else f\"{n} words, at most 8 allowed\"\n```")),
    (CRITIC.format(constraint="Use the word 'waves' at least twice, without commas.", response=_SHOT_RESPONSE),
     ("```python\ndef check(response: str):\n    n = response.lower().count('waves')\n    if n < 2:\n"
      "        return f\"'waves' {n} times, at least 2 needed\"\n    k = response.count(',')\n"
      "    return True if k == 0 else f\"{k} commas, none allowed\"\n```")),
]
"""Worked examples, given as earlier turns of the conversation (in the prompt itself, a small model copied the
example's check for constraints it did not fit)."""

REFINE = """{prompt}

Your previous answer:
{response}

What is wrong with it:
{failures}

Write the answer again so that these problems are gone and every other requirement of the task still holds. \
Reply with the new answer only."""

REANSWER = """{prompt}

An earlier answer to this had these problems:
{failures}

Write a new answer that avoids them and meets every requirement of the task. Reply with the answer only."""

OUTLINE = """Before answering, outline how to satisfy every requirement of this task (numbered points, no answer yet):

{prompt}"""

FOLLOW = """{prompt}

Follow this outline:
{plan}

Reply with the answer only."""


class TextGenSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_tokens: int = Field(default=400, ge=16)
    """Longest answer."""
    temperature: float = Field(default=0.0, ge=0)
    """Sampling temperature (0: greedy)."""


class CriticSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    code_checks: bool = True
    """Let the critic check a constraint with a function it writes, run in the sandbox (strong feedback)."""
    max_tokens: int = Field(default=300, ge=16)
    """Longest critic answer."""
    timeout: float = Field(default=10.0, gt=0)
    """Seconds for one check in the sandbox."""


class RefineSettings(TextGenSettings):
    temperature: float = Field(default=0.7, ge=0)
    """Sampling temperature of the refinements: greedy refinements of one prompt are one answer, and the
    critic's choice among several is what moves a small model."""
    samples: int = Field(default=3, ge=1, le=16)
    """Refinements drawn per round; the critic keeps the one that meets most constraints."""
    show_previous: bool = False
    """Show the previous answer with its faults (the paper's form). Off by default: shown its answer, the
    embedded 1.5B model gave it back nearly unchanged (one note too long and ending wrongly: none of 6 samples
    fixed both faults, 1 of 5 did without it; docs/workflows/decrim.md); the faults are named either way."""


class TextSearchSettings(TextGenSettings):
    n: int = Field(default=3, ge=1)
    """Breadth of the algorithm."""
    sample_temperature: float = Field(default=0.8, ge=0)
    """Temperature of every sample after the first (the first is greedy)."""


def _prompt(state: Any) -> str:
    prompt = state.get("prompt")
    if not prompt:
        raise ValueError("the state has no 'prompt' (give --input '{\"prompt\": \"...\"}')")
    return str(prompt)


async def respond(state: Any, ctx: Any, settings: TextGenSettings) -> dict[str, Any]:
    text = await ask(ctx, RESPOND.format(prompt=_prompt(state)), max_tokens=settings.max_tokens,
                     temperature=settings.temperature, purpose="respond")
    return {"response": text.strip()}


async def _critique_one(ctx: Any, constraint: str, response: str, known: str | None,
                        settings: CriticSettings) -> tuple[dict[str, Any], str | None]:
    """One constraint's verdict, and the check function to keep for the next round (None: judged by the model)."""
    code = known
    answer = ""
    if code is None:
        answer = await ask(ctx, CRITIC.format(constraint=constraint, response=response[:4000]),
                           max_tokens=settings.max_tokens, purpose="critic", shots=CRITIC_SHOTS)
        block = code_block(answer)
        if settings.code_checks and block and re.search(r"def\s+check\s*\(", block):
            code = block
    if code is not None:
        result = await run_predicate(ctx, code, "check", response, timeout=settings.timeout)
        if result.error is None:
            why = "" if result.ok else _check_reason(constraint, result.got)
            return {"constraint": constraint, "ok": result.ok, "how": "code", "why": why}, code
        if _RESPONSE_FAULT.match(result.error):
            # the check ran and the response would not parse (JSON that is not JSON, a missing key or line):
            # the constraint fails, and the error says where
            return {"constraint": constraint, "ok": False, "how": "code",
                    "why": f"the response does not parse: {result.error}"}, code
        # a check that does not run says nothing: the model judges this constraint instead (this round; the
        # next round asks the critic afresh, and it may write a check that runs)
        answer = await ask(ctx, CRITIC.format(constraint=constraint, response=response[:4000])
                           .replace("- If yes:", "- (Do not write code.) If yes:"), max_tokens=settings.max_tokens,
                           purpose="critic")
    verdict = re.search(r"\b(PASS|FAIL)\b\s*:?\s*(.*)", answer, re.DOTALL)
    ok = verdict is not None and verdict.group(1) == "PASS"
    why = "" if ok else (verdict.group(2).strip().splitlines()[0] if verdict and verdict.group(2).strip() else "judged not met")
    return {"constraint": constraint, "ok": ok, "how": "model", "why": why}, None


_RESPONSE_FAULT = re.compile(r"(json\.decoder\.JSONDecodeError|ValueError|KeyError|IndexError)\b")
"""Errors a check raises on a response that lacks the form it checks (the check's own bugs raise others:
NameError, SyntaxError, TypeError, AttributeError)."""


def _check_reason(constraint: str, got: str | None) -> str:
    """What a failed check said: the string it returned (its own account, with numbers), else its value."""
    try:
        said = ast.literal_eval(got or "")  # data only: the repr the sandboxed check returned
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        said = None
    if isinstance(said, str) and said.strip():
        return said.strip().splitlines()[0][:200]
    return f"the check of '{constraint}' returned {got}"


async def _critique(ctx: Any, constraints: list[str], response: str, checks: dict[str, str | None],
                    settings: CriticSettings) -> list[dict[str, Any]]:
    """Every constraint's verdict on `response`; `checks` gains the check functions written on the way."""
    critique = []
    for constraint in constraints:
        verdict, code = await _critique_one(ctx, constraint, response, checks.get(constraint), settings)
        critique.append(verdict)
        checks[constraint] = code
    return critique


async def critic(state: Any, ctx: Any, settings: CriticSettings) -> dict[str, Any]:
    """The critic on the answer, or on each of the refinements (the one that meets most constraints is kept)."""
    checks = dict(state.get("checks") or {})
    constraints = list(state.get("constraints") or [])
    answers = list(state.get("refinements") or []) or [state.get("response") or ""]
    judged = [(await _critique(ctx, constraints, answer, checks, settings), answer) for answer in answers]
    critique, response = max(judged, key=lambda pair: sum(c["ok"] for c in pair[0]))  # the first of the best
    passed = sum(c["ok"] for c in critique)
    ctx.emit("instruct.critic", failed=[c["constraint"] for c in critique if not c["ok"]],
             by_code=sum(c["how"] == "code" for c in critique), passed=passed,
             answers=[sum(c["ok"] for c in crit) for crit, _ in judged])
    best = state.get("best") or None
    if best and passed <= best["passed"]:
        # no refinement the critic finds better: go on from (and end with) the best answer so far. A tie keeps
        # it too -- a refinement the critic cannot tell apart mends a constraint it misjudged as often as it
        # breaks one it cannot check (a first run, which took ties, lost 4 prompts the single answer met)
        ctx.emit("instruct.revert", passed=passed, best=best["passed"])
        return {"response": best["response"], "critique": best["critique"], "all_pass": False, "checks": checks,
                "refinements": []}
    best = {"response": response, "passed": passed, "critique": critique}
    return {"response": response, "critique": critique, "all_pass": passed == len(critique), "checks": checks,
            "best": best, "refinements": []}


async def refine(state: Any, ctx: Any, settings: RefineSettings) -> dict[str, Any]:
    failed = [c for c in state.get("critique") or [] if not c.get("ok")]
    failures = "\n".join(f"- {c['constraint']}" + (f" ({c['why']})" if c.get("why") else "") for c in failed)
    rounds = int(state.get("rounds") or 0)
    template = REFINE if settings.show_previous else REANSWER
    prompt = template.format(prompt=_prompt(state), response=state.get("response") or "",
                             failures=failures or "- (none listed)")
    texts = [await ask(ctx, prompt, max_tokens=settings.max_tokens, temperature=settings.temperature,
                       seed=rounds * settings.samples + i, purpose="refine") for i in range(settings.samples)]
    return {"refinements": [t.strip() for t in texts], "rounds": rounds + 1}


class TextGenerator:
    """PlanGEN's generator for a written answer: outlines, answers following them, the verification agent's
    score against the constraints."""

    def __init__(self, ctx: Any, prompt: str, constraints: list[str], settings: TextSearchSettings) -> None:
        self.ctx, self.prompt, self.constraints, self.s = ctx, prompt, constraints, settings
        self.scored: list[dict[str, Any]] = []

    def _temp(self, seed: int) -> float:
        return self.s.temperature if seed == 0 else self.s.sample_temperature

    async def plan(self, seed: int) -> str:
        return (await ask(self.ctx, OUTLINE.format(prompt=self.prompt), max_tokens=self.s.max_tokens,
                          temperature=self._temp(seed), seed=seed, purpose="plan")).strip()

    async def complete(self, plan: str | None, seed: int) -> str:
        text = FOLLOW.format(prompt=self.prompt, plan=plan) if plan else RESPOND.format(prompt=self.prompt)
        return (await ask(self.ctx, text, max_tokens=self.s.max_tokens, temperature=self._temp(seed),
                          seed=seed, purpose="respond")).strip()

    async def score_plan(self, plan: str) -> float:
        return await verify_against(self.ctx, self.prompt, self.constraints, plan)

    async def score(self, candidate: str) -> float:
        reward = await verify_against(self.ctx, self.prompt, self.constraints, candidate)
        self.scored.append({"reward": round(reward, 4)})
        return reward


async def search(state: Any, ctx: Any, settings: TextSearchSettings) -> dict[str, Any]:
    algorithm = state.get("algorithm") or "best_of_n"
    gen = TextGenerator(ctx, _prompt(state), list(state.get("constraints") or []), settings)
    outcome = await run_algorithm(algorithm, gen, settings.n)
    best = outcome.best
    ctx.emit("instruct.search", algorithm=algorithm, rewards=[t.reward for t in outcome.tried])
    return {"response": best.candidate if best else "", "reward": best.reward if best else 0.0,
            "candidates": gen.scored, "plans": [{"plan": p, "score": s} for p, s in outcome.plans]}


NODE_TYPES = [
    NodeType("instruct.respond", respond, TextGenSettings, ("prompt",), ("response",), "answers the prompt"),
    NodeType("instruct.critic", critic, CriticSettings, ("constraints", "response", "refinements", "checks", "best"),
             ("critique", "all_pass", "checks", "best", "response", "refinements"),
             "DeCRIM's critic: each constraint checked, by a function it writes and runs in the sandbox where it can",
             sandbox=True),
    NodeType("instruct.refine", refine, RefineSettings, ("prompt", "response", "critique", "rounds"),
             ("refinements", "rounds"), "new answers that avoid the failed constraints, for the critic to choose among"),
    NodeType("instruct.search", search, TextSearchSettings, ("prompt", "constraints", "algorithm"),
             ("response", "reward", "candidates", "plans"),
             "PlanGEN: the selected algorithm over outlines and answers, scored by the verification agent"),
]

__all__ = ["NODE_TYPES", "TextGenerator"]
