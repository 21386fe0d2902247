"""Selected regression tests (Agentless; `docs/workflows/agentless.md`), node type `swe.regression`: the model
names the passing tests a correct fix may rightly change, and the repository's tests without them
(`regression.test_cmd`) verify candidates and the base from then on."""

from __future__ import annotations

import dataclasses
import re
import shlex

from pydantic import Field

from agentflow.events.kinds import RepairRegression
from agentflow.graph.run.context import NodeContext
from agentflow.repair.edit.steps import ask_helper
from agentflow.repair.nodetypes.nodekit import emit, how_to_verify
from agentflow.repair.nodetypes.runtime import PromptSettings, RepairRuntime, run_default
from agentflow.repair.nodetypes.state import RepairState
from agentflow.sandbox.base import sh_command
from agentflow.swe.testparse import parse_pytest_summary
from agentflow.swe.testrun import test_env
from agentflow.swe.workspace import EVAL_DIR


class RegressionSettings(PromptSettings):
    """Settings of the swe.regression node type."""

    regression_pool: int = Field(default=40, ge=1, le=400)
    """Passing repository tests shown to the model when it picks those the fix may change."""
    test_timeout_s: float = run_default("test_timeout_s")


def deselecting(python: str, deselected: list[str]) -> str:
    """The repository's test command without `deselected` (pytest node ids)."""
    skip = "".join(f" --deselect {shlex.quote(t)}" for t in deselected)
    return f"{python} -m pytest -q -p no:cacheprovider{skip}"


async def regression_node(state: RepairState, ctx: NodeContext[RepairRuntime], settings: RegressionSettings) -> RepairState:
    rt = ctx.deps
    bench = rt.bench
    if bench.mode != "repo" or bench.cfg.tests.cmd is not None:
        return {"regression": {"selected": False}}  # task tests, or the user's own command, verify candidates
    if (state.get("regression") or {}).get("test_cmd"):
        return {}  # selected already (a workflow with two such nodes): the first selection stands
    await bench.reset()
    cmd = f"{bench.python} -m pytest -q -rA -p no:cacheprovider"
    env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"} if bench.local else None
    result = await bench.sandbox.exec(sh_command(test_env(EVAL_DIR) + cmd), env=env, timeout=settings.test_timeout_s)
    passing = sorted(t for t, outcome in parse_pytest_summary(result.output).items() if outcome == "passed")
    shown = passing[: settings.regression_pool]
    if not shown:
        return {"regression": {"selected": False, "passing": 0}}
    values = {"issue": rt.issue, "tests": "\n".join(f"[{i}] {t}" for i, t in enumerate(shown, 1))}
    text = await ask_helper(rt.models.coder, settings, "regression", values, max_tokens=48, seed=settings.seed)
    numbers = [int(n) for n in re.findall(r"\d+", text) if 1 <= int(n) <= len(shown)]
    # a model that would drop most of the suite is not selecting: keep every test then
    deselected = [shown[n - 1] for n in dict.fromkeys(numbers)] if len(set(numbers)) <= len(shown) // 2 else []
    test_cmd = deselecting(bench.python, deselected)
    base = await bench.verify_base(dataclasses.replace(how_to_verify(state), test_cmd=test_cmd))
    emit(rt, RepairRegression(passing=len(passing), deselected=deselected, test_cmd=test_cmd, answer=text[:200]))

    return {"regression": {"selected": True, "passing": len(passing), "deselected": deselected,
                           "test_cmd": test_cmd},
            "base": base}


__all__ = ["RegressionSettings", "deselecting", "regression_node"]
