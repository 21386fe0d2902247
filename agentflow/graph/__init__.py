"""Workflows: define (Python builder or YAML -> WorkflowSpec), validate (networkx), compile (LangGraph), run
with durable checkpoints (AgentflowSaver) and exactly-once tool effects.

Names resolve lazily so `import agentflow.graph` stays cheap (LangGraph and networkx load on first use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentflow._lazy import lazy_getattr

_LAZY: dict[str, str] = {
    "END": "agentflow.graph.spec",
    "START": "agentflow.graph.spec",
    "WorkflowSpec": "agentflow.graph.spec",
    "NodeSpec": "agentflow.graph.spec",
    "FieldSpec": "agentflow.graph.spec",
    "RouteSpec": "agentflow.graph.spec",
    "ParallelSpec": "agentflow.graph.spec",
    "Workflow": "agentflow.graph.builder",
    "load_workflow": "agentflow.graph.loader",
    "find_workflow": "agentflow.graph.loader",
    "spec_from_dict": "agentflow.graph.loader",
    "validate": "agentflow.graph.validation",
    "check_workflow": "agentflow.graph.validation",
    "Problem": "agentflow.graph.validation",
    "to_mermaid": "agentflow.graph.mermaid",
    "compile_workflow": "agentflow.graph.compile",
    "build_graph": "agentflow.graph.compile",
    "NodeContext": "agentflow.graph.context",
    "RunHandles": "agentflow.graph.context",
    "WorkflowRunner": "agentflow.graph.runner",
    "RunResult": "agentflow.graph.runner",
    "StreamEvent": "agentflow.graph.runner",
    "open_checkpointer": "agentflow.graph.runner",
    "AgentflowSaver": "agentflow.graph.checkpoint",
}

if TYPE_CHECKING:  # pragma: no cover
    from agentflow.graph.builder import Workflow
    from agentflow.graph.checkpoint import AgentflowSaver
    from agentflow.graph.compile import build_graph, compile_workflow
    from agentflow.graph.context import NodeContext, RunHandles
    from agentflow.graph.loader import find_workflow, load_workflow, spec_from_dict
    from agentflow.graph.mermaid import to_mermaid
    from agentflow.graph.runner import RunResult, StreamEvent, WorkflowRunner, open_checkpointer
    from agentflow.graph.spec import END, START, FieldSpec, NodeSpec, ParallelSpec, RouteSpec, WorkflowSpec
    from agentflow.graph.validation import Problem, check_workflow, validate


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


__all__ = [
    "END",
    "START",
    "AgentflowSaver",
    "FieldSpec",
    "NodeContext",
    "NodeSpec",
    "ParallelSpec",
    "Problem",
    "RouteSpec",
    "RunHandles",
    "RunResult",
    "StreamEvent",
    "Workflow",
    "WorkflowRunner",
    "WorkflowSpec",
    "build_graph",
    "check_workflow",
    "compile_workflow",
    "find_workflow",
    "load_workflow",
    "open_checkpointer",
    "spec_from_dict",
    "to_mermaid",
    "validate",
]
