"""What the repair node types share while one task runs: the task's workbench (sandbox), the role models, the
budget, the events, and each node's effective settings.

Settings of a node, from weakest to strongest: `RepairConfig`'s defaults and the run's `-c key=value`, the
node's `settings:` in the workflow, then `-c nodes.<node>.<key>=value`. A node type declares which settings
it takes (`settings_model`), so a typo in a workflow is a validation problem, not a silently ignored key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, create_model

from agentflow.budget import Budget
from agentflow.config import StrictConfig
from agentflow.errors import ConfigError
from agentflow.events import EventLog
from agentflow.models.base import ChatModel
from agentflow.repair.config import RepairConfig
from agentflow.repair.outcome import Candidate
from agentflow.repair.spectrum import ExampleRun
from agentflow.repair.targeting import SuiteReach
from agentflow.repair.workbench import REPRO_PATH, Verification, Workbench


def settings_model(name: str, fields: Sequence[str]) -> type[StrictConfig]:
    """A settings class holding `fields` of `RepairConfig`, with their types, bounds, defaults and docs (one
    source: the fields are RepairConfig's own)."""
    defs: dict[str, Any] = {f: (RepairConfig.model_fields[f].annotation, RepairConfig.model_fields[f]) for f in fields}
    return create_model(name, __base__=StrictConfig, __doc__=f"Settings of the {name} node type.", **defs)


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

    def emit(self, kind: str, /, *, node_id: str | None = None, parent_id: str | None = None, **data: Any) -> Any:
        prefix = f"{self.instance_id}/"
        return self.inner.emit(kind, node_id=prefix + node_id if node_id else node_id,
                               parent_id=prefix + parent_id if parent_id else parent_id,
                               instance_id=self.instance_id, **data)


@dataclass
class RepairRuntime:
    """One task's handles for the repair node types (RunContext.resources["repair"])."""

    cfg: RepairConfig
    bench: Workbench
    models: RoleModels
    budget: Budget
    events: EventLog
    issue: str
    record: Callable[[Candidate], None]
    node_settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Node name -> the settings it sets (workflow's `settings:` then `-c nodes.<node>.*`)."""
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
    _synced: bool = False

    @property
    def iid(self) -> str:
        return self.bench.task.instance_id

    def cfg_for(self, node: str) -> RepairConfig:
        """The settings a node runs with."""
        update = self.node_settings.get(node)
        return self.cfg.model_copy(update=update) if update else self.cfg

    async def sync(self, state: Any) -> None:
        """Bring the workbench in line with the state once per process: after a resume the sandbox is new, so
        the base verification and a kept reproduction script come back from the checkpointed state."""
        if self._synced:
            return
        self._synced = True
        base = state.get("base") if isinstance(state, dict) else None
        if base:
            self.bench.base = Verification.model_validate(base)
        regression = (state.get("regression") or {}) if isinstance(state, dict) else {}
        if regression.get("test_cmd"):  # the selected regression tests (`swe.regression`)
            self.bench.cfg = self.bench.cfg.model_copy(update={"test_cmd": regression["test_cmd"]})
            self.bench.own_test_cmd = True
        spectrum = (state.get("spectrum") or {}) if isinstance(state, dict) else {}
        self.bench.reach = SuiteReach.from_json(spectrum.get("reach")) if isinstance(spectrum, dict) else None
        repro = (state.get("reproduction") or {}) if isinstance(state, dict) else {}
        if repro.get("kept") and repro.get("script"):
            await self.bench.reset()
            await self.bench.sandbox.write_file(REPRO_PATH, repro["script"])
            self.bench.repro = True


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
