"""Agents: the tool-calling loop, the planner / coder / critic / verifier roles and their output schemas.

`await Agent("planner", model=...).run("task", ctx=ToolContext(...), budget=budget)` runs one agent;
`agent_node(agent, input_key=..., output_key=...)` makes it a graph node.
"""

from agentflow.agents.agent import Agent, Task
from agentflow.agents.config import AgentConfig
from agentflow.agents.node import AgentNode, agent_node
from agentflow.agents.result import AgentResult, ErrorKind, StopReason
from agentflow.agents.roles import ROLES, load_agent_config
from agentflow.agents.schemas import (
           CoderReport,
           Critique,
           FinalText,
           Issue,
           Plan,
           PlanStep,
           Verdict,
           parse_output,
)
from agentflow.agents.stream import AgentEvent
from agentflow.agents.textproto import parse_tool_blocks
from agentflow.models.structured import OutputParseError

__all__ = ["ROLES", "Agent", "AgentConfig", "AgentEvent", "AgentNode", "AgentResult", "CoderReport", "Critique",
           "ErrorKind", "FinalText", "Issue", "OutputParseError", "Plan", "PlanStep", "StopReason", "Task", "Verdict",
           "agent_node", "load_agent_config", "parse_output", "parse_tool_blocks"]
