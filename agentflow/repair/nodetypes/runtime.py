"""What the repair node types share while one task runs (`RepairRuntime`, the run's `deps`: workbench, role
models, budget, events), and the settings classes of the node types (how a node gets its settings:
`run/workflow_settings.py`). A node type declares which settings it takes, so a typo in a workflow is a
validation problem, not a silently ignored key; a node's steps read its settings, and the run's config
(`rt.cfg`) only for what is the run's (its models, its test command).
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any, Self

from pydantic import Field

from agentflow.budget import Budget
from agentflow.config import StrictConfig
from agentflow.events import Event, EventLog
from agentflow.models.base import ChatModel
from agentflow.repair.config import EditFormat, RepairConfig, RepairPrompts
from agentflow.repair.locate.spectrum import ExampleRun
from agentflow.repair.run.candidate_log import CandidateLog
from agentflow.repair.verify.workbench import Workbench


def run_default(name: str) -> Any:
    """The field `name` of `RepairConfig` (its default, bounds and description: one source, RepairConfig's own)
    as the default of a node's setting of that name, for a setting the run has too."""
    return copy.copy(RepairConfig.model_fields[name])


class NodeSettings(StrictConfig):
    """The settings of a repair node type (a subclass writes them out): each as the run sets it unless the
    node's `settings:` or `-c nodes.<node>.*` do."""


class PromptSettings(NodeSettings):
    """The settings of a node type whose seeded model calls render the repair's prompts."""

    prompts: RepairPrompts = run_default("prompts")
    seed: int = run_default("seed")


class HelperSettings(PromptSettings):
    """The settings of a node type that makes short helper calls (`steps.ask_helper`)."""

    max_tokens: int = run_default("max_tokens")


class ShowsCodeSettings(PromptSettings):
    """The settings of a node type whose prompts show the task's code windows (`steps.code_windows`)."""

    max_prompt_chars: int = run_default("max_prompt_chars")
    windows: int = run_default("windows")
    window_lines: int = run_default("window_lines")
    rank_keep: int = run_default("rank_keep")


class EditFormatSettings(NodeSettings):
    """The settings of a node type that asks for edits in an edit format (`swe.edit`, `swe.trajectories`)."""

    edit_format: EditFormat = run_default("edit_format")

    def for_coder(self, run: RepairConfig) -> Self:
        """These settings with `edit_format: auto` as the format the task's runtime resolved for its coder
        (`steps.edit_format_for`)."""
        return self if self.edit_format != "auto" else self.model_copy(update={"edit_format": run.edit_format})


class FinalistSettings(NodeSettings):
    """The settings of a node type that picks among finalists (`swe.discriminate`, `swe.vote_tests`)."""

    finalists: int = Field(default=3, ge=2, le=8)
    """Candidates that reach the final pick (distinct patches, the best by tests then value or votes)."""


@dataclass
class RoleModels:
    """The model of each role (instrumented: they charge the task's budget and write `model.call` events)."""

    coder: ChatModel
    planner: ChatModel | None = None
    critic: ChatModel | None = None
    verifier: ChatModel | None = None


class TaskEvents(EventLog):
    """The run's event log as seen by one task: node ids get the instance id in front, so the graph nodes and
    search trees of many tasks share one events file."""

    def __init__(self, inner: EventLog, instance_id: str) -> None:
        super().__init__(None, run_id=inner.run_id)
        self.inner, self.instance_id = inner, instance_id
        self.capture_content = inner.capture_content

    def write(self, event: Event) -> Event:
        prefix = f"{self.instance_id}/"
        return self.inner.write(event.model_copy(update={
            "node_id": prefix + event.node_id if event.node_id else event.node_id,
            "parent_id": prefix + event.parent_id if event.parent_id else event.parent_id,
            "instance_id": self.instance_id}))



@dataclass
class RepairRuntime:
    """One task's handles for the repair node types: the `deps` of its run (`NodeContext[RepairRuntime]`)."""

    cfg: RepairConfig
    bench: Workbench
    models: RoleModels
    budget: Budget
    events: EventLog
    issue: str
    candidates: CandidateLog
    """The task's record of its candidates (call it with one); once one passed tests that decide (`passed`),
    `swe.edit` nodes with `stop_on_success` draw no new samples."""
    source_cache: dict[str, dict[str, str]] = field(default_factory=dict)
    """Patch -> the Python sources at base + patch, read once per task (`rollout.sources_at`)."""
    base_shown: bool = False
    """The `repair.base` event was written (the first edit of the task writes it)."""
    examples_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    examples_checked: bool = False
    examples_before: ExampleRun | None = None
    """What the issue's examples show on the unchanged code, when a run of them can tell a change (checked
    once a task, under `examples_lock`, by the first edit `examples_retries` looks at)."""

    @property
    def iid(self) -> str:
        return self.bench.task.instance_id
