"""Workflows: define (Python builder or YAML -> WorkflowSpec), validate (networkx), compile (LangGraph), run
with durable checkpoints (AgentflowSaver) and exactly-once tool effects.

Names resolve lazily so `import agentflow.graph` stays cheap (LangGraph and networkx load on first use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentflow._lazy import lazy_getattr

_MODULES: dict[str, tuple[str, ...]] = {
    "agentflow.graph.define.spec": (
        "END", "START", "WorkflowSpec", "NodeSpec", "FieldSpec", "RouteSpec", "ParallelSpec",
    ),
    "agentflow.graph.define.builder": ("Workflow",),
    "agentflow.graph.define.loader": ("load_workflow", "find_workflow", "spec_from_dict"),
    "agentflow.graph.define.mermaid": ("to_mermaid",),
    "agentflow.graph.check.validation": ("validate", "check_workflow", "Problem"),
    "agentflow.graph.compile.compiler": ("compile_workflow", "build_graph"),
    "agentflow.graph.run.context": ("NodeContext", "RunHandles"),
    "agentflow.graph.run.runner": ("WorkflowRunner", "RunResult", "StreamEvent", "open_checkpointer"),
    "agentflow.graph.persist.checkpoint": ("AgentflowSaver",),
}
_LAZY: dict[str, str] = {name: module for module, names in _MODULES.items() for name in names}

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


__all__ = ["END", "START", "AgentflowSaver", "FieldSpec", "NodeContext", "NodeSpec", "ParallelSpec",
           "Problem", "RouteSpec", "RunHandles", "RunResult", "StreamEvent", "Workflow", "WorkflowRunner",
           "WorkflowSpec", "build_graph", "check_workflow", "compile_workflow", "find_workflow",
           "load_workflow", "open_checkpointer", "spec_from_dict", "to_mermaid", "validate"]
