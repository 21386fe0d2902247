"""What the repair node types share while one task runs (`RepairRuntime`, the run's `deps`): the task's
workbench (sandbox), the role models, the budget and the events; and the settings classes of the node types.

Settings of a node, from weakest to strongest: `RepairConfig`'s defaults and the run's `-c key=value`, the
node's `settings:` in the workflow, then `-c nodes.<node>.<key>=value`. A node type declares which settings
it takes (a `NodeSettings` class with fields of `RepairConfig`, `repair_fields`), so a typo in a workflow is a
validation problem, not a silently ignored key; a node runs its steps with `settings.over(rt.cfg)`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, create_model

from agentflow.budget import Budget
from agentflow.config import StrictConfig
from agentflow.errors import ConfigError
from agentflow.events import Event, EventLog
from agentflow.models.base import ChatModel
from agentflow.repair.config import RepairConfig
from agentflow.repair.outcome import Candidate
from agentflow.repair.spectrum import ExampleRun
from agentflow.repair.workbench import Workbench

PROMPT_FIELDS = ("prompts", "max_prompt_chars", "windows", "window_lines", "seed")
"""The fields of `RepairConfig` a node type whose prompts show the task's code takes."""


class NodeSettings(StrictConfig):
    """The settings of a repair node type: some fields of `RepairConfig` (`repair_fields` gives a subclass
    them), each as the run sets it unless the node's `settings:` or `-c nodes.<node>.*` do."""

    def over(self, run: RepairConfig) -> RepairConfig:
        """The `RepairConfig` the node's steps run with: the fields these settings were given over the run's
        (its other fields: the model specs, the test command...); `edit_format: auto` is the format resolved for
        the run's coder."""
        update = {name: getattr(self, name) for name in self.model_fields_set}
        if update.get("edit_format") == "auto":
            update["edit_format"] = run.edit_format
        return run.model_copy(update=update)


SettingsT = TypeVar("SettingsT", bound=NodeSettings)


def repair_fields(*fields: str) -> Callable[[type[SettingsT]], type[SettingsT]]:
    """Class decorator: the `NodeSettings` class with `fields` of `RepairConfig` (their types, bounds, defaults
    and docs: one source, RepairConfig's own). The fields are RepairConfig's, so a node reads them from
    `settings.over(rt.cfg)`, typed there."""
    defs: dict[str, Any] = {f: (RepairConfig.model_fields[f].annotation, RepairConfig.model_fields[f]) for f in fields}

    def with_fields(cls: type[SettingsT]) -> type[SettingsT]:
        return create_model(cls.__name__, __base__=cls, __module__=cls.__module__, __doc__=cls.__doc__, **defs)

    return with_fields


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
    record: Callable[[Candidate], None]
    solved: bool = False
    """A candidate passed tests that decide (with `stop_on_success`, `swe.edit` nodes draw no new samples)."""
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


def node_settings_for(spec: Any, registry: Any, overrides: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each typed node's explicit settings (the workflow's, then `-c nodes.<node>.*`), validated; a
    `-c nodes.X` naming no typed node is a ConfigError."""
    out: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()

    def walk(workflow: Any) -> None:
        for name, node in workflow.nodes.items():
            if node.type:
                node_type = registry.require(node.type, f"node '{name}'")
                merged = {**node.settings, **overrides.get(name, {})}
                parsed = node_type.parse_settings(merged, f"node '{name}'")
                out[name] = parsed.model_dump(exclude_unset=True) if isinstance(parsed, BaseModel) else {}
                seen.add(name)
            if node.subgraph is not None and hasattr(node.subgraph, "nodes"):
                walk(node.subgraph)

    walk(spec)
    unknown = sorted(set(overrides) - seen)
    if unknown:
        raise ConfigError(
            f"nodes.{unknown[0]}: the workflow has no typed node of that name",
            hint=f"typed nodes: {', '.join(sorted(seen)) or '(none)'}",
        )
    return out
