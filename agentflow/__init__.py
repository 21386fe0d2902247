"""agentflow: graph-defined LLM agent workflows with search, durable checkpoints and hardened sandboxes.

Importing this package is cheap on purpose: provider SDKs, LangGraph and Docker are imported only by
the modules that use them. Public names are resolved lazily on first attribute access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentflow._lazy import lazy_getattr

__version__ = "0.1.0"

_LAZY: dict[str, str] = {
    "Budget": "agentflow.budget",
    "BudgetExceeded": "agentflow.budget",
    "UserError": "agentflow.errors",
    "AgentflowError": "agentflow.errors",
    "EventLog": "agentflow.events",
    "Event": "agentflow.events",
    "Message": "agentflow.models.base",
    "ChatRequest": "agentflow.models.base",
    "ChatResponse": "agentflow.models.base",
    "load_model": "agentflow.models.spec",
    "FunctionModel": "agentflow.models.testing",
    "TestModel": "agentflow.models.testing",
    "tool_call": "agentflow.models.testing",
    "tool": "agentflow.tools.decorator",
    "ToolRegistry": "agentflow.tools.registry",
    "ToolContext": "agentflow.tools.context",
    "ToolResult": "agentflow.tools.result",
    "Agent": "agentflow.agents.agent",
    "AgentResult": "agentflow.agents.result",
    "AgentEvent": "agentflow.agents.stream",
    "AgentConfig": "agentflow.agents.config",
    "Workflow": "agentflow.graph.define.builder",
    "WorkflowRunner": "agentflow.graph.run.runner",
    "RunHandles": "agentflow.graph.run.context",
    "NodeContext": "agentflow.graph.run.context",
    "RunResult": "agentflow.graph.run.runner",
    "load_workflow": "agentflow.graph.define.loader",
    "open_sandbox": "agentflow.sandbox",
}

if TYPE_CHECKING:  # pragma: no cover
    from agentflow.agents.agent import Agent
    from agentflow.agents.config import AgentConfig
    from agentflow.agents.result import AgentResult
    from agentflow.agents.stream import AgentEvent
    from agentflow.budget import Budget, BudgetExceeded
    from agentflow.errors import AgentflowError, UserError
    from agentflow.events import Event, EventLog
    from agentflow.graph.define.builder import Workflow
    from agentflow.graph.define.loader import load_workflow
    from agentflow.graph.run.context import NodeContext, RunHandles
    from agentflow.graph.run.runner import RunResult, WorkflowRunner
    from agentflow.models.base import ChatRequest, ChatResponse, Message
    from agentflow.models.spec import load_model
    from agentflow.models.testing import FunctionModel, TestModel, tool_call
    from agentflow.sandbox import open_sandbox
    from agentflow.tools.context import ToolContext
    from agentflow.tools.decorator import tool
    from agentflow.tools.registry import ToolRegistry
    from agentflow.tools.result import ToolResult


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    """The public names too (they load on first use), so help(agentflow), dir() and IDEs list them."""
    return sorted({*globals(), *_LAZY})


__all__ = [
    "Agent", "AgentConfig", "AgentEvent", "AgentResult", "AgentflowError", "Budget", "BudgetExceeded",
    "ChatRequest", "ChatResponse", "Event", "EventLog", "FunctionModel", "Message", "NodeContext", "RunHandles",
    "RunResult", "TestModel", "ToolContext", "ToolRegistry", "ToolResult", "UserError", "Workflow",
    "WorkflowRunner", "__version__", "load_model", "load_workflow", "open_sandbox", "tool", "tool_call",
]
