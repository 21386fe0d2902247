"""The built-in roles: a constant table. Change a role with overrides (`load_agent_config("coder", [...])`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from agentflow.agents.config import AgentConfig

_SCHEMAS = "agentflow.agents.schemas"


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


ROLES: Mapping[str, AgentConfig] = _RoleTable(
    {
        "planner": AgentConfig(
            name="planner",
            prompt="planner",
            tools=["search"],
            output_schema=f"{_SCHEMAS}:Plan",
            step_limit=15,
            temperature=0.2,
        ),
        "coder": AgentConfig(
            name="coder",
            prompt="coder",
            tools=["shell", "editor", "search"],
            output_schema=f"{_SCHEMAS}:CoderReport",
            step_limit=40,
            temperature=0.0,
        ),
        "critic": AgentConfig(
            name="critic",
            prompt="critic",
            tools=["search"],
            output_schema=f"{_SCHEMAS}:Critique",
            step_limit=15,
            temperature=0.2,
        ),
        "verifier": AgentConfig(
            name="verifier",
            prompt="verifier",
            tools=["tests", "search"],
            output_schema=f"{_SCHEMAS}:Verdict",
            step_limit=15,
            temperature=0.0,
        ),
    }
)
"""Role name -> default config of that role."""
