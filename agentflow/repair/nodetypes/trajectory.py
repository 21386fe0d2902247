"""A multi-turn repair trajectory (CodeMonkeys, Ehrlich et al. 2025; `docs/workflows/codemonkeys.md`), node type
`swe.trajectory`, run as the branches of a graph search node (`workflows/codemonkeys.yaml`). A trajectory writes a
test script and an edit together, sees the script run on the original code and on its change, and revises
either until it answers DONE (with `edit_format: rewrite` the suspect is rewritten whole and the script is the
answer's other code block). Its last change is a candidate, its last script joins `tests`.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from agentflow.budget import BudgetExceeded, BudgetKind
from agentflow.errors import ModelError
from agentflow.events.kinds import RepairStatus, RepairTrajectories, RepairTrajectoryTurn
from agentflow.graph.run.context import NodeContext
from agentflow.models.ask import Conversation, code_blocks
from agentflow.repair.edit.steps import (
    DEF_LINE,
    PROMPTS,
    ReadEdits,
    public_api,
    read_edits,
    read_rewrite,
    render,
    render_windows,
    rewrite_values,
    suspects,
)
from agentflow.repair.locate.focus import rotated
from agentflow.repair.locate.localize import Window
from agentflow.repair.nodetypes.nodekit import evidence_of, how_to_verify, ranked_of
from agentflow.repair.nodetypes.rollout import bench_of, branch_of, sources_at
from agentflow.repair.nodetypes.runtime import (
    EditFormatSettings,
    HelperSettings,
    RepairRuntime,
    ShowsCodeSettings,
    run_default,
)
from agentflow.repair.nodetypes.state import GeneratedTest, RepairState
from agentflow.repair.nodetypes.testgen import run_script, test_script
from agentflow.repair.outcome import Candidate
from agentflow.repair.verify.workbench import Workbench


class TrajectorySettings(EditFormatSettings, ShowsCodeSettings, HelperSettings):
    """Settings of the swe.trajectory node type (how many trajectories: its search node's `n`)."""

    turns: int = Field(default=3, ge=1, le=12)
    """Model turns of one trajectory, each followed by a run of its test script (codemonkeys' serial compute)."""
    temperature: float = run_default("temperature")


_DONE = re.compile(r"^\s*DONE\b", re.IGNORECASE | re.MULTILINE)


class SearchReplaceForm:
    """Edits as SEARCH/REPLACE blocks over the suspects shown; each turn's blocks apply to the code so far."""

    revise = PROMPTS.render("part_revise_blocks.j2")

    def __init__(self, cfg: TrajectorySettings, sources: dict[str, str], issue: str, windows: list[Window]) -> None:
        code = render_windows(sources, windows, cfg.max_prompt_chars // 2, at_least_one=True)
        self.path = windows[0].path if windows else None
        self.first = render(cfg, "trajectory", {"issue": issue, "api": public_api(sources), "code": code,
                                                "path": self.path or "path/to/file.py"})
        self.sources = sources

    script = staticmethod(test_script)

    def gave_edit(self, text: str) -> bool:
        return "<<<<<<<" in text

    def read(self, text: str, files: dict[str, str]) -> ReadEdits:
        return read_edits(text, {**self.sources, **files}, self.path, complete=True)


class RewriteForm:
    """The trajectory's suspect rewritten whole (the form small models get right most often), each turn's
    rewrite replacing the last; the test script is the answer's other code block."""

    def __init__(self, cfg: TrajectorySettings, sources: dict[str, str], issue: str, windows: list[Window]) -> None:
        self.window, self.sources = windows[0], sources
        values = rewrite_values(cfg, sources, self.window)
        self.first = render(cfg, "trajectory_rewrite", values | {
            "issue": issue, "api": public_api(sources), "path": self.window.path})
        name = DEF_LINE.match(values["snippet"])
        self._def = re.compile(rf"^\s*{re.escape(name.group(0))}\s*\(", re.MULTILINE) if name else None
        self._lines = {line.strip() for line in values["snippet"].splitlines() if len(line.strip()) > 3}
        self.revise = PROMPTS.render("part_revise_rewrite.j2", symbol=values["symbol"], opening=values["opening"])

    def _is_rewrite(self, block: str) -> bool:
        """A block that gives the window back: its `def` line, or (a window of a function's body) most of its
        lines."""
        if self._def is not None:
            return self._def.search(block) is not None
        shared = sum(line.strip() in self._lines for line in block.splitlines())
        return bool(self._lines) and shared >= len(self._lines) / 2

    def script(self, text: str) -> str | None:
        return next((b for b in code_blocks(text) if not self._is_rewrite(b)), None)

    def gave_edit(self, text: str) -> bool:
        return any(self._is_rewrite(b) for b in code_blocks(text))

    def read(self, text: str, files: dict[str, str]) -> ReadEdits:
        return read_rewrite(text, self.sources, self.window)


async def _turn_feedback(bench: Workbench, cfg: TrajectorySettings, number: int, script: str | None,
                         files: dict[str, str], status: str, revise: str) -> tuple[str, str]:
    """Run the script on the original code and on the trajectory's change (the workspace is left at the change);
    (the next user message, patch)."""
    async with bench.lock:
        await bench.restore("")
        for path, content in files.items():
            await bench.sandbox.write_file(path, content)
        patch, _ = await bench.diff()
        base_out = patched_out = "(no script yet)"
        if script:
            base_ok, base_out = await run_script(bench, f"traj_{number}", script, "")
            patched_ok, patched_out = await run_script(bench, f"traj_{number}", script, patch)
            base_out = ("passed " if base_ok else "failed ") + base_out
            patched_out = ("passed " if patched_ok else "failed ") + patched_out
    values = {"edit_status": status, "base_output": base_out, "patched_output": patched_out,
              "diff": patch[:2500] or "(no change yet)", "revise": revise}
    return render(cfg, "trajectory_turn", values), patch


async def trajectory(ctx: NodeContext[RepairRuntime], bench: Workbench, cfg: TrajectorySettings, number: int,
                     form: SearchReplaceForm | RewriteForm, drawn: list[int]) -> dict[str, Any]:
    """One trajectory: its last patch and script, the turns it took and why it stopped; `drawn` gains each
    model call's sample number."""
    rt = ctx.deps
    conversation = Conversation.start(render(cfg, "system", {}), form.first)
    files: dict[str, str] = {}
    script: str | None = None
    patch, stopped, turns = "", "turns", 0
    limit: BudgetKind | None = None
    error: str | None = None
    for turn in range(cfg.turns):
        sample = 1000 * number + turn
        try:
            with rt.call_slots.hold():
                drawn.append(sample)
                text = await conversation.reply(rt.models.coder, temperature=cfg.temperature,
                                                seed=cfg.seed + sample, max_tokens=cfg.max_tokens)
        except BudgetExceeded as exc:
            # the value, not the enum: the search's report is state, and a checkpoint holds plain data
            stopped, limit, error = RepairStatus.LIMITS_EXCEEDED.value, exc.kind, str(exc)
            break
        except ModelError as exc:
            stopped, error = "model_error", f"model_error: {exc}"
            break
        turns += 1
        new_script = form.script(text)
        if _DONE.search(text) and new_script is None and not form.gave_edit(text) and turn > 0:
            stopped = "done"
            break
        script = new_script or script
        read = form.read(text.replace(new_script, "") if new_script else text, files)  # edits: not in the script
        if read.status == "ok":
            files.update(read.files)
        status = PROMPTS.render("part_edit_status.j2", status=read.status, gave_edit=form.gave_edit(text),
                                errors="; ".join(read.errors[:2]))
        reply, patch = await _turn_feedback(bench, cfg, number, script, files, status, form.revise)
        ctx.emit(RepairTrajectoryTurn(trajectory=number, turn=turn, edit=read.status, script=bool(script),
                                      feedback=reply[:2000]))
        conversation.tell(reply)
    return {"trajectory": number, "patch": patch, "script": script, "turns": turns, "stopped": stopped,
            "limit": limit, "error": error}


async def trajectory_node(state: RepairState, ctx: NodeContext[RepairRuntime], settings: TrajectorySettings
                          ) -> RepairState:
    """`swe.trajectory`: one trajectory (the branch's number picks its suspect and seeds); its change verified and
    recorded as candidate `t<number + 1>`."""
    rt = ctx.deps
    cfg = settings.for_coder(rt.cfg)
    bench = bench_of(rt, ctx)
    number = max(branch_of(ctx)[1], 0)
    sources = await sources_at(rt, bench, "")
    # each trajectory starts from another suspect (the rotation a search's samples use)
    ranked = suspects(cfg, sources, rt.issue, "", focus=0, prefer=ranked_of(state), evidence=evidence_of(state))
    windows = rotated(ranked, number)
    form = (RewriteForm if cfg.edit_format == "rewrite" and windows else SearchReplaceForm)(cfg, sources, rt.issue,
                                                                                          windows)
    drawn: list[int] = []
    run = await trajectory(ctx, bench, cfg, number, form, drawn)
    cand_id = f"{rt.iid}/t{number + 1}"
    tests: list[GeneratedTest] = [{"candidate_id": cand_id, "script": run["script"]}] if run["script"] else []
    attempts: list[Candidate] = []
    if run["patch"].strip():
        async with bench.lock:
            verification, _ = await bench.verify(run["patch"], how_to_verify(state))
        attempts.append(Candidate(instance_id=rt.iid, candidate_id=cand_id, parent_id=f"{rt.iid}/root", status="ok",
                                  patch=run["patch"], verification=verification, sample=number + 1))
        rt.record(attempts[0])
    record = {k: v for k, v in run.items() if k != "patch"}
    ctx.emit(RepairTrajectories(runs=[record]))
    return {"attempts": attempts, "tests": tests, "drawn": drawn, "trajectory_runs": [record]}


def trajectories_stop(runs: list[dict[str, Any]]) -> tuple[BudgetKind | None, str | None]:
    """(the limit that cut it or None, the error) of the first trajectory run that ended on an error; (None, None)
    when every one ended as it should."""
    cut = next((r for r in runs if r["stopped"] not in ("done", "turns")), None)
    return (None, None) if cut is None else (cut.get("limit"), cut.get("error") or cut["stopped"])


__all__ = ["RewriteForm", "SearchReplaceForm", "TrajectorySettings", "trajectories_stop", "trajectory",
           "trajectory_node"]
