"""One edit sample of the coder: the prompt sent (or a tool-calling edit on an in-memory overlay of the
sources), and the answer read into new file contents, nothing written to the workspace; the `swe.edit` graph
node (`rollout.py`) draws its samples with it."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from agentflow.budget import Budget
from agentflow.events import EventLog
from agentflow.events.kinds import RepairToolEdit
from agentflow.models.ask import ask
from agentflow.models.base import ChatModel, Usage
from agentflow.repair.edit.overlay import SourceOverlay
from agentflow.repair.edit.steps import EditPrompt, ReadEdits, read_edits, read_rewrite


@dataclass
class DrawnEdit:
    """An answer and what it does to the sources."""

    text: str
    finish: str
    """The answer's finish reason (`stop`, `length`, or why a tool-calling edit stopped)."""
    read: ReadEdits
    usage: Usage | None = None
    """The model call's usage (one chat call); None for a tool-calling edit (see `model_calls`)."""
    model_calls: int = 1
    tool_calls: int = 0


class DrawSettings(Protocol):
    """The settings of an edit sample (`swe.edit`'s, its edit format resolved: `EditFormatSettings.for_coder`)."""

    @property
    def edit_format(self) -> str: ...

    @property
    def temperature(self) -> float: ...

    @property
    def seed(self) -> int: ...

    @property
    def max_tokens(self) -> int: ...

    @property
    def stop(self) -> list[str]: ...

    @property
    def tool_steps(self) -> int: ...


async def draw_edit(coder: ChatModel, cfg: DrawSettings, prompt: EditPrompt, sources: Mapping[str, str], *,
                    cand_id: str, parent_id: str, sample: int, events: EventLog, budget: Budget,
                    iid: str) -> DrawnEdit:
    """One sample of `prompt` (seeded `cfg.seed + sample`), read against `sources`: a rewrite of the prompt's
    window, SEARCH/REPLACE blocks, or (`edit_format: tools`) the files a tool-calling edit changed."""
    if cfg.edit_format == "tools":
        return await edit_with_tools(coder, cfg, prompt.user, sources, cand_id=cand_id, sample=sample,
                                     events=events, budget=budget, iid=iid)
    with_node = getattr(coder, "with_node", None)
    answer = await ask(with_node(cand_id, parent_id) if with_node else coder, prompt.user, system=prompt.system,
                       temperature=cfg.temperature, seed=cfg.seed + sample,
                       max_tokens=prompt.max_tokens(cfg.max_tokens), stop=cfg.stop)
    if prompt.window is not None:
        read = read_rewrite(answer.text, sources, prompt.window)
    else:
        read = read_edits(answer.text, sources, prompt.focus_path, complete=answer.finish != "length")
    return DrawnEdit(answer.text, answer.finish, read, usage=answer.usage)


async def edit_with_tools(coder: ChatModel, cfg: DrawSettings, task: str, sources: Mapping[str, str], *,
                          cand_id: str, sample: int, events: EventLog, budget: Budget, iid: str) -> DrawnEdit:
    """One tool-calling edit: the coder works on an in-memory overlay of the sources with the editor tools
    (samples edit concurrently; the sandbox stays free); the files it changed are the edit."""
    from agentflow.agents.agent import Agent
    from agentflow.agents.config import AgentConfig
    from agentflow.tools.context import ToolContext

    overlay = SourceOverlay(dict(sources))
    agent = Agent(AgentConfig(name="coder", tools=["editor"], step_limit=cfg.tool_steps,
                              max_tokens=cfg.max_tokens, temperature=cfg.temperature, tool_protocol="native"),
                  model=coder)
    result = await agent.run(task, ctx=ToolContext(sandbox=overlay, events=events), budget=budget)
    calls, tools = max(1, result.usage.model_calls), result.usage.tool_calls
    text = str(getattr(result.output, "text", result.output) or "")
    finish = "stop" if result.stop_reason == "done" else result.stop_reason
    changed = {p: t for p, t in overlay.changed().items() if p in sources}
    if not changed:
        errors = [f"no file was changed ({result.stop_reason}{': ' + result.error if result.error else ''})"]
        return DrawnEdit(text, finish, ReadEdits("noop", errors=errors), model_calls=calls, tool_calls=tools)
    for path, content in changed.items():
        try:
            ast.parse(content)
        except SyntaxError as exc:
            why = f"{path} does not parse after the edit: {exc.msg} (line {exc.lineno})"
            return DrawnEdit(text, finish, ReadEdits("apply_error", errors=[why]), model_calls=calls, tool_calls=tools)
    events.write(RepairToolEdit(node_id=cand_id, instance_id=iid, sample=sample, steps=result.usage.model_calls,
                                stop_reason=result.stop_reason, files=sorted(changed)))

    return DrawnEdit(text, finish, ReadEdits("ok", changed), model_calls=calls, tool_calls=tools)


def retry_hint(read: ReadEdits, prompt: EditPrompt) -> str:
    """What the next sample of the same window is told after an answer that changed nothing or could not be
    read."""
    return (
        "Your previous answer did not change the code"
        + (f" ({'; '.join(read.errors[:2])})" if read.errors else "")
        + (". Copy the SEARCH lines exactly from the code shown and change them." if prompt.window is None
           else ". Answer with the corrected code in one ```python block.")
    )


__all__ = ["DrawnEdit", "draw_edit", "edit_with_tools", "retry_hint"]
