"""Instruction-following node types (`type: instruct.critic`; the list is `NODE_TYPES`), shaped as the
`reason.*` nodes are (`agentflow.reasoning.nodes`), with `InstructState`.

The benchmark's own checkers (`agentflow.instruct.checks`) are never used here: the critic sees only the
constraint text the decomposition produced.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from pydantic import Field

from agentflow.codegen.execute import run_predicate, run_text
from agentflow.config import StrictConfig
from agentflow.events.kinds import InstructChecks, InstructCritic, InstructFix, InstructRevert, InstructScore
from agentflow.graph.compile.nodetypes import NodeType
from agentflow.graph.run.context import NodeContext
from agentflow.graph.search.tree import read_path
from agentflow.instruct.state import (
    AnswerScoreKeys,
    BestKeys,
    CheckCode,
    CheckKeys,
    ConstraintScore,
    ConstraintVerdict,
    CritiqueKeys,
    InstructState,
    RefinementKeys,
    RoundKeys,
)
from agentflow.models.ask import code_block
from agentflow.models.templates import package_templates
from agentflow.reasoning.constraints import verify_against
from agentflow.reasoning.llm import SamplingSettings, node_ask, sampling
from agentflow.reasoning.state import ConstraintKeys, PlanKeys, PromptKeys, ResponseKeys

PROMPTS = package_templates(__file__)
"""The prompts of the instruction-following node types (`prompts/*.j2`)."""

JUDGED = ""
"""What `checks` holds for a constraint the critic said code cannot check: judged by the model every round,
without asking for a check again (None: no check kept, ask afresh)."""

CHECK_SHOTS = PROMPTS.shots("check_shots.j2", "check.j2")
"""Worked examples as earlier turns (a small model copies an example written into the prompt itself), one of
each common kind of constraint: a small critic fits its check to the nearest example. A check is asked for
without the response: shown one, the critic fits the check to the answer instead of the constraint."""

FIX_SHOTS = PROMPTS.shots("fix_shots.j2", "fix.j2")
"""Worked examples of a code fix, as earlier turns."""


class TextGenSettings(SamplingSettings):
    max_tokens: int = Field(default=400, ge=16)
    """Longest answer."""


class RespondSettings(TextGenSettings):
    plan: str | None = "plan"
    """State key of an outline to follow when it holds one (`instruct.outline`'s); None: never."""


class CriticSettings(StrictConfig):
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
    code_fix: bool = True
    """Also ask for `def fix(response) -> str`, a function that edits the best answer so far to mend the failed
    constraints (run in the sandbox; what it returns is one more refinement for the critic to judge): a coder
    model can write such an edit where it cannot write the answer (docs/workflows/decrim.md)."""
    fix_timeout: float = Field(default=10.0, gt=0)
    """Seconds for the fix function in the sandbox."""
    show_previous: bool = False
    """Show the previous answer with its faults (the paper's form); off, only the faults are named (shown its
    answer, a small model gives it back nearly unchanged: docs/workflows/decrim.md)."""


class ScoreSettings(StrictConfig):
    """Settings of `instruct.score`."""

    constraint_checks: bool = True
    """Score an answer as the share of constraints that hold, each checked as decrim's critic does. Off, or
    without a sandbox: the verification agent's single score (docs/workflows/plangen.md)."""
    critic: CriticSettings = Field(default_factory=CriticSettings)
    """The constraint checks' settings."""
    output: str = "score"
    """State key the reward is written to, as `{score, failed}` (a search's `value:` reads it)."""


def _prompt(state: InstructState) -> str:
    prompt = state.get("prompt")
    if not prompt:
        raise ValueError("the state has no 'prompt' (give --input '{\"prompt\": \"...\"}')")
    return str(prompt)


async def respond(state: InstructState, ctx: NodeContext[object], settings: RespondSettings) -> InstructState:
    plan = read_path(state, settings.plan) if settings.plan else None
    prompt = PROMPTS.render("follow.j2", prompt=_prompt(state), plan=plan) if plan else _prompt(state)
    temperature, seed = sampling(ctx, settings)
    text = await node_ask(ctx, prompt, max_tokens=settings.max_tokens, temperature=temperature, seed=seed,
                          purpose="respond")
    return {"response": text.strip()}


async def outline(state: InstructState, ctx: NodeContext[object], settings: TextGenSettings) -> InstructState:
    temperature, seed = sampling(ctx, settings)
    text = await node_ask(ctx, PROMPTS.render("outline.j2", prompt=_prompt(state)), max_tokens=settings.max_tokens,
                          temperature=temperature, seed=seed, purpose="plan")
    return {"plan": text.strip()}


_SURFACE = re.compile(
    r"\d|['\"<]|\b(words?|sentences?|paragraphs?|bullets?|commas?|characters?|letters?|capitals?|"
    r"uppercase|lowercase|json|keys?|starts?|begins?|ends?|title|exclamation|question marks?|"
    r"hashtags?|punctuation|once|twice|thrice|one|two|three|four|five|six|seven|eight|nine|ten)\b", re.IGNORECASE)
"""What code can check in a text: a count, a quoted word or phrase, a named form (bullets, case, JSON, how it
starts or ends). A constraint with none of these ("Explain recursion", "to a child") is judged by the model
without asking for a check: asked, a small critic writes one anyway, of some surface feature the constraint
does not ask for."""


def checkable(constraint: str) -> bool:
    """Whether to ask the critic for a check function for `constraint` (else it judges it)."""
    return bool(_SURFACE.search(constraint))


async def _critique_one(ctx: NodeContext[object], constraint: str, response: str, known: CheckCode,
                        settings: CriticSettings) -> tuple[ConstraintVerdict, CheckCode]:
    """One constraint's verdict, and what to keep for the next round: the check function, JUDGED, or None (no
    check that runs: ask afresh)."""
    code: str | None = known if known is not None else await _write_check(ctx, constraint, settings)
    if code:
        result = await run_predicate(ctx.run.sandbox, code, "check", response, timeout=settings.timeout)
        if result.error is None:
            why = "" if result.ok else _check_reason(constraint, result.got)
            return {"constraint": constraint, "ok": result.ok, "how": "code", "why": why}, code
        if _RESPONSE_FAULT.match(result.error):
            # the check ran and the response would not parse (JSON that is not JSON, a missing key or line):
            # the constraint fails, and the error says where
            return {"constraint": constraint, "ok": False, "how": "code",
                    "why": f"the response does not parse: {result.error}"}, code
        # a check that does not run says nothing: the model judges this constraint instead (this round; the
        # next round asks for a check afresh, and it may write one that runs)
        code = None
    answer = await node_ask(ctx, PROMPTS.render("judge.j2", constraint=constraint, response=response[:4000]),
                            max_tokens=settings.max_tokens, purpose="judge")
    verdict = re.search(r"\b(PASS|FAIL)\b\s*:?\s*(.*)", answer, re.DOTALL)
    ok = verdict is not None and verdict.group(1) == "PASS"
    why = "" if ok else (verdict.group(2).strip().splitlines()[0] if verdict and verdict.group(2).strip() else "judged not met")
    return {"constraint": constraint, "ok": ok, "how": "model", "why": why}, code


async def _write_check(ctx: NodeContext[object], constraint: str, settings: CriticSettings) -> str:
    """A check function for `constraint`, or JUDGED when code cannot check it (or the critic wrote none)."""
    if not (settings.code_checks and checkable(constraint)):
        return JUDGED
    answer = await node_ask(ctx, PROMPTS.render("check.j2", constraint=constraint), max_tokens=settings.max_tokens,
                            purpose="check", shots=CHECK_SHOTS)
    block = code_block(answer)
    return block if block and re.search(r"def\s+check\s*\(", block) else JUDGED


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


async def _critique(ctx: NodeContext[object], constraints: list[str], response: str, checks: dict[str, CheckCode],
                    settings: CriticSettings) -> list[ConstraintVerdict]:
    """Every constraint's verdict on `response`; `checks` gains the check functions written on the way."""
    critique = []
    for constraint in constraints:
        verdict, code = await _critique_one(ctx, constraint, response, checks.get(constraint), settings)
        critique.append(verdict)
        checks[constraint] = code
    return critique


async def critic(state: InstructState, ctx: NodeContext[object], settings: CriticSettings) -> InstructState:
    """The critic on the answer, or on each of the refinements (the one that meets most constraints is kept)."""
    checks = dict(state.get("checks") or {})
    constraints = list(state.get("constraints") or [])
    answers = list(state.get("refinements") or []) or [state.get("response") or ""]
    judged = [(await _critique(ctx, constraints, answer, checks, settings), answer) for answer in answers]
    critique, response = max(judged, key=lambda pair: sum(c["ok"] for c in pair[0]))  # the first of the best
    passed = sum(c["ok"] for c in critique)
    ctx.emit(InstructCritic(failed=[c["constraint"] for c in critique if not c["ok"]],
                            by_code=sum(c["how"] == "code" for c in critique), passed=passed,
                            answers=[sum(c["ok"] for c in crit) for crit, _ in judged]))
    best = state.get("best") or None
    if best and passed <= best["passed"]:
        # no refinement the critic finds better: go on from (and end with) the best answer so far. A tie keeps
        # it too -- a refinement the critic cannot tell apart mends a constraint it misjudged as often as it
        # breaks one it cannot check
        ctx.emit(InstructRevert(passed=passed, best=best["passed"]))
        return {"response": best["response"], "critique": best["critique"], "all_pass": False, "checks": checks,
                "refinements": []}
    best = {"response": response, "passed": passed, "critique": critique}
    return {"response": response, "critique": critique, "all_pass": passed == len(critique), "checks": checks,
            "best": best, "refinements": []}


async def refine(state: InstructState, ctx: NodeContext[object], settings: RefineSettings) -> InstructState:
    """One refinement: in decrim, one branch of the `refine` search, each branch seeded apart by its place among
    its siblings; the last branch also asks for the code fix (appended after its refinement, so the branches'
    gathered refinements come first and a tie goes to a written answer)."""
    failed = [c for c in state.get("critique") or [] if not c.get("ok")]
    failures = "\n".join(f"- {c['constraint']}" + (f" ({c['why']})" if c.get("why") else "") for c in failed)
    rounds = int(state.get("rounds") or 0)
    sample, siblings = ctx.run.sample or 0, ctx.run.siblings or 1
    template = "refine.j2" if settings.show_previous else "reanswer.j2"
    prompt = PROMPTS.render(template, prompt=_prompt(state), response=state.get("response") or "",
                             failures=failures)
    text = await node_ask(ctx, prompt, max_tokens=settings.max_tokens, temperature=settings.temperature,
                          seed=rounds * siblings + sample, purpose="refine")
    refinements = [text.strip()]
    if settings.code_fix and sample == siblings - 1 and failed and state.get("response"):
        fixed = await _code_fix(ctx, _prompt(state), str(state["response"]), failures, rounds, settings)
        if fixed:
            refinements.append(fixed)
    return {"refinements": refinements, "rounds": rounds + 1}


async def _code_fix(ctx: NodeContext[object], prompt: str, response: str, failures: str, rounds: int,
                    settings: RefineSettings) -> str | None:
    """The answer as the model's `fix` function edits it (run in the sandbox), or None when it wrote none that
    runs. Said in the run's events either way. Greedy in the first round, sampled after: a fix that did not
    help leaves the answer and its faults as they were, and the same question would get the same fix."""
    answer = await node_ask(ctx, PROMPTS.render("fix.j2", prompt=prompt, response=response[:4000], failures=failures),
                            max_tokens=settings.max_tokens, temperature=settings.temperature if rounds else 0.0,
                            seed=rounds, purpose="fix", shots=FIX_SHOTS)
    block = code_block(answer)
    if not block or not re.search(r"def\s+fix\s*\(", block):
        ctx.emit(InstructFix(ok=False, error="no fix function in the answer"))
        return None
    result = await run_text(ctx.run.sandbox, block, "fix", response, timeout=settings.fix_timeout)
    if not result.ok:
        ctx.emit(InstructFix(ok=False, error=result.error or f"fix returned {result.got}, not text"))
        return None
    fixed = (result.got or "").strip()
    if not fixed or fixed == response.strip():
        ctx.emit(InstructFix(ok=False, error="fix returned the answer unchanged" if fixed else "fix returned ''"))
        return None
    ctx.emit(InstructFix(ok=True, chars=len(fixed)))
    return fixed


def _by_constraint(ctx: NodeContext[object], constraints: list[str], enabled: bool) -> bool:
    """Whether answers are judged constraint by constraint: checks run in the sandbox, so not without one."""
    return enabled and bool(constraints) and ctx.run.sandbox is not None


async def checks(state: InstructState, ctx: NodeContext[object], settings: CriticSettings) -> InstructState:
    """The check of every constraint written once, from the constraint alone (the critic never shows it an
    answer): every answer judged later, in any branch of a search, is judged by the same checks."""
    constraints = list(state.get("constraints") or [])
    if not _by_constraint(ctx, constraints, settings.code_checks):
        return {}
    written = dict(state.get("checks") or {})
    for constraint in constraints:
        if written.get(constraint) is None:
            written[constraint] = await _write_check(ctx, constraint, settings)
    ctx.emit(InstructChecks(by_code=sum(bool(code) for code in written.values()), constraints=len(constraints)))
    return {"checks": written}


async def score(state: InstructState, ctx: NodeContext[object],
                settings: ScoreSettings) -> dict[str, ConstraintScore | dict[str, CheckCode]]:
    """`instruct.score`: the reward under `settings.output` (`score` unless renamed, so the update is keyed by
    that setting), and the checks written on the way."""
    constraints = list(state.get("constraints") or [])
    response = str(state.get("response") or "")
    if _by_constraint(ctx, constraints, settings.constraint_checks):
        known = dict(state.get("checks") or {})
        critique = await _critique(ctx, constraints, response, known, settings.critic)
        value = sum(c["ok"] for c in critique) / len(critique)
        failed = [c["constraint"] for c in critique if not c["ok"]]
        ctx.emit(InstructScore(reward=round(value, 4), failed=failed))
        return {settings.output: {"score": round(value, 4), "failed": failed}, "checks": known}
    value = await verify_against(ctx, _prompt(state), constraints, response)
    ctx.emit(InstructScore(reward=round(value, 4), failed=None))
    return {settings.output: {"score": round(value, 4)}}


NODE_TYPES: list[NodeType[InstructState, object, Any]] = [
    NodeType("instruct.respond", respond, RespondSettings, (PromptKeys, PlanKeys), (ResponseKeys,),
             "answers the prompt (following the outline when there is one)", state=InstructState),
    NodeType("instruct.outline", outline, TextGenSettings, (PromptKeys,), (PlanKeys,),
             "an outline of how to meet every requirement of the prompt, no answer yet", state=InstructState),
    NodeType("instruct.critic", critic, CriticSettings, (ConstraintKeys, ResponseKeys, RefinementKeys, CheckKeys, BestKeys),
             (CritiqueKeys, CheckKeys, BestKeys, ResponseKeys, RefinementKeys),
             "DeCRIM's critic: each constraint checked, by a function it writes and runs in the sandbox where it can",
             sandbox=True, state=InstructState),
    NodeType("instruct.refine", refine, RefineSettings, (PromptKeys, ResponseKeys, CritiqueKeys, RoundKeys),
             (RefinementKeys, RoundKeys),
             "new answers that avoid the failed constraints, for the critic to choose among", state=InstructState),
    NodeType("instruct.checks", checks, CriticSettings, (ConstraintKeys, CheckKeys), (CheckKeys,),
             "the critic's check function for each constraint code can check, written before any answer",
             sandbox=True, state=InstructState),
    NodeType("instruct.score", score, ScoreSettings, (PromptKeys, ConstraintKeys, ResponseKeys, CheckKeys),
             (AnswerScoreKeys, CheckKeys),
             "an answer's reward: the share of constraints that hold, checked as the critic does (the verification "
             "agent's score without a sandbox)", sandbox=True, state=InstructState),
]

__all__ = ["NODE_TYPES"]
