"""Multi-turn repair trajectories (CodeMonkeys, Ehrlich et al. 2025): each trajectory writes a test script and
an edit together, sees the script run in the sandbox on the original code and on its change, and revises
either over several turns until it answers DONE. `trajectories` run at once (parallel compute), each for at
most `turns` model calls (serial compute). Node type `swe.trajectories` (in place of a search node): every
trajectory's last change is a candidate (verified like any other), and its last script joins `tests`, which
`swe.vote_tests` runs against every candidate.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from agentflow.budget import BudgetExceeded, CallSlots
from agentflow.errors import ModelError
from agentflow.models.base import ChatRequest, Message
from agentflow.repair.config import RepairConfig
from agentflow.repair.nodekit import emit, runtime
from agentflow.repair.outcome import Candidate
from agentflow.repair.runtime import RepairRuntime, settings_model
from agentflow.repair.steps import code_windows, public_api, read_edits, render
from agentflow.repair.testgen import run_script, test_script

TrajectorySettings = settings_model(
    "swe.trajectories",
    ("trajectories", "turns", "concurrency", "temperature", "max_tokens", "seed", "prompts", "max_prompt_chars",
     "windows", "window_lines"),
)
_DONE = re.compile(r"^\s*DONE\b", re.IGNORECASE | re.MULTILINE)


def _without_blocks(text: str, script: str | None) -> str:
    """The answer without its test script (so edit blocks are read from the rest)."""
    return text.replace(script, "") if script else text


async def _turn_feedback(rt: RepairRuntime, cfg: RepairConfig, number: int, script: str | None,
                         files: dict[str, str], status: str) -> tuple[str, str]:
    """Run the script on the original code and on the trajectory's change; (the next user message, patch)."""
    async with rt.bench.lock:
        await rt.bench.restore("")
        for path, content in files.items():
            await rt.bench.sandbox.write_file(path, content)
        patch, _ = await rt.bench.diff()
        base_out = patched_out = "(no script yet)"
        if script:
            base_ok, base_out = await run_script(rt.bench, f"traj_{number}", script, "")
            patched_ok, patched_out = await run_script(rt.bench, f"traj_{number}", script, patch)
            base_out = ("passed " if base_ok else "failed ") + base_out
            patched_out = ("passed " if patched_ok else "failed ") + patched_out
        await rt.bench.reset()
    values = {"edit_status": status, "base_output": base_out, "patched_output": patched_out,
              "diff": patch[:2500] or "(no change yet)"}
    return render(cfg, "trajectory_turn", values), patch


async def trajectory(rt: RepairRuntime, cfg: RepairConfig, number: int, sources: dict[str, str],
                     counter: list[int], calls: CallSlots) -> dict[str, Any]:
    """One trajectory: its last patch and script, the turns it took and why it stopped."""
    code, path = code_windows(cfg, sources, rt.issue, "", focus=number, budget_chars=cfg.max_prompt_chars // 2)
    first = render(cfg, "trajectory", {"issue": rt.issue, "api": public_api(sources), "code": code,
                                       "path": path or "path/to/file.py"})
    messages = [Message.system(render(cfg, "system", {})), Message.user(first)]
    files: dict[str, str] = {}
    script: str | None = None
    patch, stopped, turns = "", "turns", 0
    for turn in range(cfg.turns):
        try:
            with calls.hold():
                counter[0] += 1
                request = ChatRequest(messages=messages, temperature=cfg.temperature,
                                      seed=cfg.seed + 1000 * number + turn, max_tokens=cfg.max_tokens)
                text = (await rt.models.coder.chat(request)).text
        except BudgetExceeded as exc:
            stopped = f"limits_exceeded:{exc.kind}"
            break
        except ModelError as exc:
            stopped = f"model_error: {exc}"
            break
        turns += 1
        messages.append(Message.assistant(text))
        new_script = test_script(text)
        if _DONE.search(text) and new_script is None and "<<<<<<<" not in text and turn > 0:
            stopped = "done"
            break
        script = new_script or script
        read = read_edits(_without_blocks(text, new_script), {**sources, **files}, path, complete=True)
        if read.status == "ok":
            files.update(read.files)
            status = "Your edit was applied."
        else:
            status = f"Your edit was not applied ({read.status}: {'; '.join(read.errors[:2]) or 'no edit blocks'})."
            if "<<<<<<<" not in text:
                status = "You gave no edit."
        reply, patch = await _turn_feedback(rt, cfg, number, script, files, status)
        emit(rt, "repair.trajectory_turn", trajectory=number, turn=turn, edit=read.status, script=bool(script),
             feedback=reply[:2000])
        messages.append(Message.user(reply))
    return {"trajectory": number, "patch": patch, "script": script, "turns": turns, "stopped": stopped}


async def trajectories_node(state: Any, ctx: Any, settings: Any) -> dict[str, Any]:
    rt = runtime(ctx)
    await rt.sync(state)
    cfg = rt.cfg_for(ctx.node)
    async with rt.bench.lock:
        await rt.bench.reset()
        sources = await rt.bench.python_sources()
    gate = asyncio.Semaphore(cfg.concurrency)
    counter, calls = [0], CallSlots(rt.budget)

    async def one(number: int) -> dict[str, Any]:
        async with gate:
            return await trajectory(rt, cfg, number, sources, counter, calls)

    # every trajectory finishes before an error goes up: none may go on in a sandbox that is being closed
    results = await asyncio.gather(*(one(i) for i in range(cfg.trajectories)), return_exceptions=True)
    failed = next((r for r in results if isinstance(r, BaseException)), None)
    if failed is not None:
        raise failed
    runs = [r for r in results if isinstance(r, dict)]
    attempts, tests = [], []
    for run in runs:
        cand_id = f"{rt.iid}/t{run['trajectory'] + 1}"
        if run["script"]:
            tests.append({"candidate_id": cand_id, "script": run["script"]})
        if not run["patch"].strip():
            continue
        async with rt.bench.lock:
            verification, _ = await rt.bench.verify(run["patch"])
        attempts.append({"candidate_id": cand_id, "patch": run["patch"], "sample": run["trajectory"] + 1,
                         "verification": verification.model_dump(mode="json")})
        rt.record(Candidate(instance_id=rt.iid, candidate_id=cand_id, parent_id=f"{rt.iid}/root", status="ok",
                            patch=run["patch"], verification=verification, sample=run["trajectory"] + 1))
    emit(rt, "repair.trajectories", runs=[{k: v for k, v in r.items() if k != "patch"} for r in runs])
    errors = [r["stopped"] for r in runs if r["stopped"] not in ("done", "turns")]
    stopped = errors[0].split(":", 1)[0] if errors and errors[0].startswith("model_error") else (errors or [None])[0]
    return {"attempts": attempts, "samples": counter[0], "tests": tests,
            "search": {"stopped": stopped, "error": errors[0] if errors else None}}


__all__ = ["TrajectorySettings", "trajectories_node", "trajectory"]
