"""The built-in roles: a constant table. Change a role with overrides (`load_agent_config("coder", [...])`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from agentflow.agents.config import AgentConfig
from agentflow.agents.schemas import CoderReport, Critique, Plan, Verdict
from agentflow.config import apply_overrides, read_yaml, validate_config
from agentflow.errors import ConfigError


class _RoleTable(Mapping[str, AgentConfig]):
    """Read-only: every lookup returns a fresh copy, so no caller can change a role for everyone else."""

    def __init__(self, roles: dict[str, AgentConfig]) -> None:
        self._roles = roles

    def __getitem__(self, name: str) -> AgentConfig:
        return self._roles[name].model_copy(deep=True)

    def __iter__(self) -> Iterator[str]:
        return iter(self._roles)

    def __len__(self) -> int:
        return len(self._roles)


ROLES: Mapping[str, AgentConfig] = _RoleTable({
    "planner": AgentConfig(name="planner", prompt="planner", tools=["search"], output_schema=Plan, step_limit=15,
                           temperature=0.2),
    "coder": AgentConfig(name="coder", prompt="coder", tools=["shell", "editor", "search"], output_schema=CoderReport,
                         step_limit=40, temperature=0.0),
    "critic": AgentConfig(name="critic", prompt="critic", tools=["search"], output_schema=Critique, step_limit=15,
                          temperature=0.2),
    "verifier": AgentConfig(name="verifier", prompt="verifier", tools=["tests", "search"], output_schema=Verdict,
                            step_limit=15, temperature=0.0),
})
"""Role name -> default config of that role."""


def load_agent_config(source: str | Path | Mapping[str, Any] | AgentConfig,
                      overrides: Iterable[str] = ()) -> AgentConfig:
    """Build an `AgentConfig` from a role name (`planner`), a YAML file, a mapping or a config, then apply
    `-c` overrides (`step_limit=10`, `model=openai:gpt-4o-mini`, or another YAML file)."""
    if isinstance(source, (AgentConfig, Mapping)):
        base: dict[str, Any] = source.model_dump() if isinstance(source, AgentConfig) else dict(source)
        where = "agent config"
    elif str(source) in ROLES:
        base, where = ROLES[str(source)].model_dump(), f"role {source}"
    elif Path(source).suffix in (".yaml", ".yml") or Path(source).exists():
        loaded = read_yaml(source)
        if not isinstance(loaded, Mapping):
            raise ConfigError(f"{source}: expected a mapping of agent config fields at the top level")
        base, where = dict(loaded), str(source)
    else:
        raise ConfigError(f"unknown agent {str(source)!r}: use a role ({', '.join(ROLES)}) or a YAML file path")
    return validate_config(AgentConfig, apply_overrides(base, overrides), source=where)
