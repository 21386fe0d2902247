"""Model-written tests as judges (CodeMonkeys, Ehrlich et al. 2025; `docs/workflows/codemonkeys.md`), node type
`swe.vote_tests`: the candidates that may be the fix (`nodekit.may_fix`) vote by the generated tests they pass,
and a selection trajectory decides among those the vote cannot split. Scripts run only in the task's sandbox,
from its scratch folder (never in a patch); exit status 0 is a pass.
"""

from __future__ import annotations

import re

from pydantic import Field

from agentflow.budget import BudgetExceeded
from agentflow.errors import ModelError
from agentflow.events.kinds import RepairSelectTurn, RepairTestVote
from agentflow.graph.run.context import NodeContext
from agentflow.models.ask import Conversation, code_blocks
from agentflow.repair.edit.steps import PROMPTS, render
from agentflow.repair.nodetypes.discriminate import picked
from agentflow.repair.nodetypes.nodekit import declined, emit, may_fix, submit
from agentflow.repair.nodetypes.runtime import FinalistSettings, HelperSettings, RepairRuntime, run_default
from agentflow.repair.nodetypes.state import RepairState
from agentflow.repair.outcome import Candidate
from agentflow.repair.verify.workbench import Workbench
from agentflow.swe.normalize import normalise_output
from agentflow.swe.workspace import EVAL_DIR


class VoteTestsSettings(FinalistSettings, HelperSettings):
    """Settings of the swe.vote_tests node type."""

    select_turns: int = Field(default=3, ge=1, le=10)
    """Model turns of the final selection trajectory (running scripts on finalists, then a choice)."""
    temperature: float = run_default("temperature")
    test_timeout_s: float = run_default("test_timeout_s")


async def run_script(bench: Workbench, name: str, script: str, patch: str) -> tuple[bool, str]:
    """(passed, output) of a model-written script on base + `patch`, in the sandbox (call under `bench.lock`)."""
    await bench.restore(patch)
    path = f"{EVAL_DIR}/generated_{name}.py"  # a prefix no module has: the scratch folder is on the harness's path
    await bench.sandbox.write_file(path, script)
    result = await bench.run_script(path)
    return result.ok, f"(exit {result.exit_code})\n{result.output.strip()[-1200:]}"


def test_script(text: str) -> str | None:
    """The first code block of an answer that is a script, not edit blocks."""
    return next((b for b in code_blocks(text) if "<<<<<<<" not in b and ">>>>>>>" not in b), None)


async def vote(bench: Workbench, candidates: list[Candidate], scripts: list[str]) -> tuple[dict[str, int], list[int]]:
    """Each candidate's count of passed tests among those that fail on the unchanged code (all when none does);
    the indices of the tests that counted."""
    async with bench.lock:
        at_base = [(await run_script(bench, f"vote_{i}", s, ""))[0] for i, s in enumerate(scripts)]
        counted = [i for i, ok in enumerate(at_base) if not ok] or list(range(len(scripts)))
        votes: dict[str, int] = {}
        for cand in candidates:
            votes[cand.candidate_id] = sum(
                [(await run_script(bench, f"vote_{i}", scripts[i], cand.patch))[0] for i in counted])
        await bench.reset()
    return votes, counted


async def select(rt: RepairRuntime, cfg: VoteTestsSettings, finals: list[Candidate], votes: dict[str, int]) -> int | None:
    """The selection trajectory: turns of running a script on a finalist (`RUN N` and a code block) until it
    chooses one (`CHOICE: N`); the 1-based pick, or None."""
    shown = "\n\n".join(PROMPTS.render("part_finalist.j2", number=n, votes=votes[a.candidate_id],
                                        patch=a.patch[:2500]) for n, a in enumerate(finals, 1))
    conversation = Conversation.start(
        render(cfg, "helper_system"),
        render(cfg, "select", {"issue": rt.issue, "finalists": shown, "count": str(len(finals))}))
    for turn in range(cfg.select_turns):
        text = await conversation.reply(rt.models.coder, temperature=0.0, seed=cfg.seed + turn,
                                        max_tokens=cfg.max_tokens)
        if (choice := picked(text, "choice", len(finals))) is not None:
            return choice
        run = re.search(r"\bRUN\s+\[?(\d+)", text, re.IGNORECASE)
        script = test_script(text)
        if run and script and 1 <= int(run.group(1)) <= len(finals):
            number = int(run.group(1))
            async with rt.bench.lock:
                _, output = await run_script(rt.bench, "select", script, finals[number - 1].patch)
                await rt.bench.reset()
            reply = PROMPTS.render("part_script_output.j2", number=number, output=output)
        else:
            reply = PROMPTS.render("part_select_ask.j2")
        if turn == cfg.select_turns - 2:
            reply += PROMPTS.render("part_select_last.j2")
        conversation.tell(reply)
        emit(rt, RepairSelectTurn(turn=turn, ran=bool(run and script), output=reply[:1500]))
    return None


async def vote_tests_node(state: RepairState, ctx: NodeContext[RepairRuntime], settings: VoteTestsSettings) -> RepairState:
    rt = ctx.deps
    attempts, noops = await may_fix(rt, state)
    if attempts is None:
        return declined("noop")
    pool: dict[str, Candidate] = {}
    for a in attempts:  # distinct patches; one that breaks the repository's tests is out
        if a.verified.passed is not False:
            pool.setdefault(normalise_output(a.patch), a)
    candidates = list(pool.values()) or attempts[:1]
    if not candidates:
        return {"chosen": None}
    scripts = list(dict.fromkeys(t["script"] for t in state.get("tests") or [] if t.get("script")))
    votes, counted = await vote(rt.bench, candidates, scripts) if scripts else ({c.candidate_id: 0 for c in candidates}, [])
    top = max(votes.values())
    finals = [c for c in candidates if votes[c.candidate_id] == top][: settings.finalists]
    pick, chosen_by, error = 1, "test_vote" if len(candidates) > 1 else "only", None
    if len(finals) > 1:
        try:
            number = await select(rt, settings, finals, votes)
            pick, chosen_by = (number, "selector") if number else (1, "test_vote")
        except (BudgetExceeded, ModelError) as exc:  # the first finalist stands; the event says why
            error = f"{type(exc).__name__}: {exc}"
    best = finals[pick - 1]
    emit(rt, RepairTestVote(votes=votes, tests=len(scripts), counted=counted,
                            finalists=[c.candidate_id for c in finals], chosen=best.candidate_id,
                            chosen_by=chosen_by, error=error))
    return await submit(rt, state, best, chosen_by, noops=noops)


__all__ = ["VoteTestsSettings", "run_script", "select", "test_script", "vote", "vote_tests_node"]
