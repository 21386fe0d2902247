"""What the repair node types share while one task runs (`RepairRuntime`, the run's `deps`): the task's
workbench (sandbox), the role models, the budget and the events; and the settings classes of the node types.

A node type declares the settings it takes (a `NodeSettings` class; one the run also has defaults to the run's,
`run_default`), so a typo in a workflow is a validation error, not an ignored key; where a node's settings come
from: docs/concepts/repair.md, "Where a setting comes from" (`workflow_settings.give_settings`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Self

from pydantic import BaseModel, Field

from agentflow.budget import Budget, CallSlots
from agentflow.config import StrictConfig
from agentflow.events import Event, EventLog
from agentflow.events.kinds import RepairCandidate
from agentflow.models.base import ChatModel
from agentflow.repair.config import EditFormat, RepairConfig, RepairPrompts, run_field
from agentflow.repair.outcome import Candidate
from agentflow.repair.run.progress import candidate_reason
from agentflow.repair.verify.workbench import Workbench


def run_default(name: str) -> Any:
    """The run's setting `name` (`run_field`: its default, bounds and description) as a node setting's."""
    return copy.copy(run_field(name))


def setting_of(settings: type[BaseModel], name: str) -> Any:
    """The field `name` of another node settings class, as a node setting's (its default, bounds, description)."""
    return copy.copy(settings.model_fields[name])


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

    max_prompt_chars: int = Field(default=12000, ge=1000)
    """Prompt size cap (about 4 characters per token); code windows are dropped to stay under it."""
    windows: int = Field(default=4, ge=1, le=20)
    """Code windows shown per attempt."""
    window_lines: int = Field(default=30, ge=5)
    """Longest code window (a function's `def` line and docstring not counted); longer functions are shown around
    the hit."""
    rank_keep: int = Field(default=2, ge=0, le=10)
    """The heuristic's best this many suspects keep their places; the functions the ranking call names follow
    them, in its order (with the spectrum's evidence the heuristic's second suspect is more often right than a
    small model's first pick: `benchmarks/localize_real.py --ranked RUN`)."""
    rank_keep_traced: bool = False
    """With a ranking and the runs' suspiciousness, the heuristic's best of the most suspect functions keeps a
    place after the `rank_keep` ones too: the ranking reorders what the runs implicate but does not drop it."""


class EditFormatSettings(NodeSettings):
    """The settings of a node type that asks for edits in an edit format (`swe.edit`, `swe.trajectories`)."""

    edit_format: EditFormat = run_default("edit_format")
    file_context_lines: int = Field(default=80, ge=0)
    """edit_format rewrite: the rest of the rewritten window's file is shown whole when it has at most this many
    lines, else (with `file_outline`) as a list of what it defines (imports, module names, classes and methods,
    functions; at most this many items); 0 shows none of it."""
    file_outline: bool = False
    """edit_format rewrite: a file longer than `file_context_lines` is listed (what it defines). Off by default:
    the first edits of packages with long files were right more often without the list (the short file's rest,
    the names a fix uses, stays; `docs/measurements/edit-probe.md`)."""

    def for_coder(self, run: RepairConfig) -> Self:
        """These settings with `edit_format: auto` as resolved for the task's coder (`steps.edit_format_for`)."""
        return self if self.edit_format != "auto" else self.model_copy(update={"edit_format": run.edit.format})


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


def candidate_event(cand: Candidate) -> RepairCandidate:
    """The `repair.candidate` event of a candidate: what progress lines, the viewer and exports read of it."""
    v = cand.verification
    return RepairCandidate(
        node_id=cand.candidate_id, parent_id=cand.parent_id, instance_id=cand.instance_id,
        candidate_id=cand.candidate_id, status=cand.status, passed=v.passed if v is not None else None,
        score=v.score if v is not None else None, reason=candidate_reason(cand), part_of=cand.part_of)


@dataclass
class RepairRuntime:
    """One task's handles for the repair node types: the `deps` of its run (`NodeContext[RepairRuntime]`)."""

    cfg: RepairConfig
    bench: Workbench
    models: RoleModels
    budget: Budget
    events: EventLog
    issue: str
    # No run state (the checkpointed state holds all of it): caches of what the sandbox gives again.
    source_cache: dict[str, dict[str, str]] = field(default_factory=dict)
    """Patch -> the Python sources at base + patch, read once per task (`rollout.sources_at`)."""
    call_slots: CallSlots = field(init=False)
    """The task's model calls in flight against its budget's call limit: concurrent search branches (codemonkeys'
    trajectories) hold one slot each per call, so together they start no call the limit cannot cover."""

    def __post_init__(self) -> None:
        self.call_slots = CallSlots(self.budget)

    @property
    def iid(self) -> str:
        return self.bench.task.instance_id

    def record(self, cand: Candidate) -> None:
        """The `repair.candidate` event of a candidate a node made (the state's `attempts` or `resampled` hold it)."""
        self.events.write(candidate_event(cand))
