"""Workflows: define (Python builder or YAML -> WorkflowSpec), validate (networkx), compile (LangGraph), run
with durable checkpoints (AgentflowSaver) and exactly-once tool effects.

Names resolve lazily so `import agentflow.graph` stays cheap (LangGraph and networkx load on first use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentflow._lazy import lazy_getattr

_LAZY: dict[str, str] = {
    "END": "agentflow.graph.define.spec",
    "START": "agentflow.graph.define.spec",
    "WorkflowSpec": "agentflow.graph.define.spec",
    "NodeSpec": "agentflow.graph.define.spec",
    "FieldSpec": "agentflow.graph.define.spec",
    "RouteSpec": "agentflow.graph.define.spec",
    "ParallelSpec": "agentflow.graph.define.spec",
    "Workflow": "agentflow.graph.define.builder",
    "load_workflow": "agentflow.graph.define.loader",
    "find_workflow": "agentflow.graph.define.loader",
    "spec_from_dict": "agentflow.graph.define.loader",
    "validate": "agentflow.graph.check.validation",
    "check_workflow": "agentflow.graph.check.validation",
    "Problem": "agentflow.graph.check.validation",
    "to_mermaid": "agentflow.graph.define.mermaid",
    "compile_workflow": "agentflow.graph.compile.compiler",
    "build_graph": "agentflow.graph.compile.compiler",
    "NodeContext": "agentflow.graph.run.context",
    "RunHandles": "agentflow.graph.run.context",
    "WorkflowRunner": "agentflow.graph.run.runner",
    "RunResult": "agentflow.graph.run.runner",
    "StreamEvent": "agentflow.graph.run.runner",
    "open_checkpointer": "agentflow.graph.run.runner",
    "AgentflowSaver": "agentflow.graph.persist.checkpoint",
}

if TYPE_CHECKING:  # pragma: no cover
    from agentflow.graph.check.validation import Problem, check_workflow, validate
    from agentflow.graph.compile.compiler import build_graph, compile_workflow
    from agentflow.graph.define.builder import Workflow
    from agentflow.graph.define.loader import find_workflow, load_workflow, spec_from_dict
    from agentflow.graph.define.mermaid import to_mermaid
    from agentflow.graph.define.spec import (
        END,
        START,
        FieldSpec,
        NodeSpec,
        ParallelSpec,
        RouteSpec,
        WorkflowSpec,
    )
    from agentflow.graph.persist.checkpoint import AgentflowSaver
    from agentflow.graph.run.context import NodeContext, RunHandles
    from agentflow.graph.run.runner import RunResult, StreamEvent, WorkflowRunner, open_checkpointer


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
