"""Verifiers: tests run in a sandbox, an LLM critic, a majority vote, a plain function, and compositions."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentflow.errors import AgentflowError, UserError
from agentflow.models.base import ChatModel, ChatRequest, Message
from agentflow.search.protocols import Verifier, VerifyContext
from agentflow.search.types import Candidate, Verification
from agentflow.swe.normalize import normalise_output
from agentflow.swe.testparse import parse_junit_xml, parse_pytest_summary


def _clamp(x: float) -> float:
    return 0.0 if x < 0 else 1.0 if x > 1 else float(x)


class FunctionVerifier:
    """Wraps `fn(candidate) -> Verification | bool | float` (sync or async): a bool decides `passed`
    (score 1/0), a float is a score in [0, 1] that decides nothing."""

    def __init__(self, fn: Callable[[Candidate], Any], name: str = "function") -> None:
        self.fn = fn
        self.name = name

    async def verify(self, candidates: Sequence[Candidate], ctx: VerifyContext) -> list[Verification]:
        out = []
        for cand in candidates:
            value = self.fn(cand)
            if inspect.isawaitable(value):
                value = await value
            if isinstance(value, Verification):
                out.append(value)
            elif isinstance(value, bool):
                out.append(Verification(score=1.0 if value else 0.0, passed=value))
            else:
                out.append(Verification(score=_clamp(float(value))))
        return out


class TestVerifier:
    """Runs a test command in a sandbox at each candidate's snapshot and parses per-test outcomes.

    Outcomes come from a JUnit XML file when `junit_path` is set, else from `pytest -rA` summary lines. A
    candidate passes when every test in `must_pass` passed, or (without `must_pass`) when the command
    exited 0 with at least one passing test and no failures. Score: the share of non-skipped tests passing.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        command: str,
        *,
        must_pass: Sequence[str] | None = None,
        junit_path: str | None = None,
        timeout: float | None = None,
        sandbox: Any = None,
        name: str = "tests",
    ) -> None:
        self.command = command
        self.must_pass = list(must_pass) if must_pass is not None else None
        self.junit_path = junit_path
        self.timeout = timeout
        self.sandbox = sandbox
        """A sandbox of its own; without it one is borrowed from the search's workspace pool."""
        self.name = name
        self._lock = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def _sandbox(self, ctx: VerifyContext) -> AsyncIterator[Any]:
        if self.sandbox is not None:
            async with self._lock:
                yield self.sandbox
        elif ctx.workspaces is not None:
            async with ctx.workspaces.acquire() as ws:
                yield ws
        else:
            raise UserError("TestVerifier needs a sandbox", hint="pass sandbox= or give the search workspaces=")

    async def verify(self, candidates: Sequence[Candidate], ctx: VerifyContext) -> list[Verification]:
        return list(await asyncio.gather(*(self._one(c, ctx) for c in candidates)))

    async def _one(self, cand: Candidate, ctx: VerifyContext) -> Verification:
        async with self._sandbox(ctx) as sb:
            try:
                if cand.state.snapshot_id is not None:
                    await sb.restore(cand.state.snapshot_id)
                result = await sb.exec(self.command, timeout=self.timeout)
                if self.junit_path is not None:
                    tests = parse_junit_xml(await sb.read_file(self.junit_path))
                else:
                    tests = parse_pytest_summary(result.output)
            except (AgentflowError, ValueError, OSError) as exc:
                return Verification(score=0.0, passed=False, error=f"{type(exc).__name__}: {exc}")
        counted = {t: o for t, o in tests.items() if o != "skipped"}
        verification = Verification(tests=tests)
        verification.score = verification.tests_passed / len(counted) if counted else 0.0
        if self.must_pass is not None:
            verification.passed = all(tests.get(t) in ("passed", "xfailed") for t in self.must_pass)
        else:
            verification.passed = result.ok and verification.tests_passed > 0 and verification.tests_failed == 0
        if result.timed_out:
            verification.error = "test command timed out"
        return verification


class Judgement(BaseModel):
    """A critic's structured judgement of one candidate."""

    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)

    score: float = Field(ge=0.0, le=1.0)
    """How likely the work solves the task, from 0 (surely not) to 1 (surely)."""
    evidence: list[str] = Field(min_length=1)
    """Concrete observations behind the score (lines of the patch, test output, reasoning steps)."""
    summary: str = ""
    """The judgement in one sentence."""


CRITIC_INSTRUCTIONS = (
    "You review the work of a coding agent. Judge whether it solves the task. Reply with a JSON object: "
    '{"score": <0..1>, "evidence": ["<observation>", ...], "summary": "<one sentence>"}. '
    "Base the score on evidence you can point to."
)


class CriticVerifier:
    """An LLM judge with structured output (`Judgement`: score + evidence). It cannot decide correctness,
    so `passed` stays None; its score ranks candidates and breaks ties between equal test results."""

    def __init__(
        self,
        model: ChatModel,
        *,
        task: str,
        instructions: str = CRITIC_INSTRUCTIONS,
        max_chars: int = 12_000,
        temperature: float | None = 0.0,
        name: str = "critic",
    ) -> None:
        self.model = model
        self.task = task
        self.instructions = instructions
        self.max_chars = max_chars
        self.temperature = temperature
        self.name = name

    def request(self, cand: Candidate) -> ChatRequest:
        if cand.state.done:
            work = cand.output or "(no output)"
            what = "Final output of the agent"
        else:
            work = "\n".join(f"[{m.role}] {m.content or ''}" for m in cand.state.messages[-8:]) or "(nothing yet)"
            what = "Steps taken so far (unfinished)"
        if len(work) > self.max_chars:
            work = work[: self.max_chars // 2] + "\n...[cut]...\n" + work[-self.max_chars // 2 :]
        return ChatRequest(
            messages=[Message.system(self.instructions), Message.user(f"Task:\n{self.task}\n\n{what}:\n{work}")],
            temperature=self.temperature,
        )

    async def verify(self, candidates: Sequence[Candidate], ctx: VerifyContext) -> list[Verification]:
        return list(await asyncio.gather(*(self._one(c, ctx) for c in candidates)))

    async def _one(self, cand: Candidate, ctx: VerifyContext) -> Verification:
        from agentflow.models.instrumented import InstrumentedModel
        from agentflow.models.structured import chat_structured

        request = self.request(cand)
        try:
            if ctx.budget is None or isinstance(self.model, InstrumentedModel):  # that one holds and charges itself
                judgement, response = await chat_structured(self.model, request, Judgement)
            else:
                with ctx.budget.model_call(request.max_tokens) as hold:
                    async with ctx.budget.deadline():
                        judgement, response = await chat_structured(self.model, request, Judgement)
                    hold.charge_model(tokens=response.usage.total_tokens, usd=response.usage.cost_usd)
        except AgentflowError as exc:
            return Verification(score=0.0, error=f"critic failed: {exc}")
        ctx.usage.add_model(response.usage)
        return Verification(score=judgement.score, critic_score=judgement.score,
                            evidence=list(judgement.evidence) + ([judgement.summary] if judgement.summary else []))


class VoteVerifier:
    """Majority vote: each candidate scores the share of finished candidates whose normalised output
    (AST-normalised Python / patch additions, else whitespace-normalised text) equals its own."""

    name = "vote"

    def __init__(self, key: Callable[[Candidate], str] | None = None) -> None:
        self.key = key or (lambda c: normalise_output(c.output, c.state.files))

    def keys(self, candidates: Sequence[Candidate]) -> list[str | None]:
        return [self.key(c) if c.state.done and c.output is not None else None for c in candidates]

    async def verify(self, candidates: Sequence[Candidate], ctx: VerifyContext) -> list[Verification]:
        keys = self.keys(candidates)
        counts = Counter(k for k in keys if k is not None)
        total = sum(counts.values())
        out = []
        for key in keys:
            share = counts[key] / total if key is not None and total else 0.0
            out.append(Verification(score=share, vote_share=share))
        return out


class CompositeVerifier:
    """Runs several verifiers and mixes them: score = weighted mean of their scores; `passed` = all deciding
    verifiers passed (None if none decides); tests, critic score, evidence and vote share are kept."""

    def __init__(self, parts: Sequence[Verifier | tuple[Verifier, float]], name: str = "composite") -> None:
        self.parts: list[tuple[Verifier, float]] = [p if isinstance(p, tuple) else (p, 1.0) for p in parts]
        if not self.parts:
            raise UserError("CompositeVerifier needs at least one verifier")
        self.name = name

    async def verify(self, candidates: Sequence[Candidate], ctx: VerifyContext) -> list[Verification]:
        results = await asyncio.gather(*(v.verify(candidates, ctx) for v, _ in self.parts))
        total_weight = sum(w for _, w in self.parts) or 1.0
        out = []
        for i in range(len(candidates)):
            merged = Verification()
            decided: list[bool] = []
            errors = []
            for (verifier, weight), per_candidate in zip(self.parts, results, strict=True):
                v = per_candidate[i]
                merged.score += weight * v.score / total_weight
                merged.parts[verifier.name] = v.score
                if v.passed is not None:
                    decided.append(v.passed)
                merged.tests.update(v.tests)
                merged.evidence.extend(v.evidence)
                if v.critic_score is not None:
                    merged.critic_score = v.critic_score
                if v.vote_share is not None:
                    merged.vote_share = v.vote_share
                if v.error:
                    errors.append(f"{verifier.name}: {v.error}")
            merged.passed = all(decided) if decided else None
            merged.error = "; ".join(errors) or None
            out.append(merged)
        return out


OracleFn = Callable[[Candidate], "bool | Awaitable[bool]"]
