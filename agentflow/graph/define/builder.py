"""The Python way to define a workflow: a small builder that produces a WorkflowSpec.

wf = Workflow("review", state=ReviewState)
wf.node("plan", plan).node("code", code).edge("plan", "code")
wf.route("code", on="status", cases={"ok": END, "retry": "code"})
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from typing import Any

from agentflow.graph.define.spec import (
    END,
    FieldSpec,
    NodeSpec,
    ParallelSpec,
    Reducer,
    RouteSpec,
    WorkflowSpec,
)
from agentflow.graph.search.settings import SearchSettings, parse_search_settings


class Workflow:
    """Builder for a WorkflowSpec; every method returns `self` so calls chain."""

    def __init__(self, name: str, state: type | None = None, *, description: str = "") -> None:
        self._spec = WorkflowSpec(name=name, description=description, state_class=state)
        if state is not None:
            self._spec.state = state_fields(state)
        self.step_limit: int | None = None
        self.interrupt_before: list[str] = []

    def node(self, name: str, fn: Callable[..., Any], *, writes: list[str] | None = None) -> Workflow:
        """Add a function node: `fn(state)` or `fn(state, ctx)`, sync or async, returning a dict of updates."""
        self._spec.nodes[name] = NodeSpec(fn=fn, writes=writes if writes is not None else inferred_writes(fn))
        return self

    def agent(self, name: str, role: str, *, output: str | None = None, **options: Any) -> Workflow:
        """Add an agent node running the agentflow.agents role `role`."""
        self._spec.nodes[name] = NodeSpec(agent=role, output=output, args=options, writes=[output or name])
        return self

    def tool(self, name: str, tool: str, args: dict[str, Any] | None = None, *, output: str | None = None) -> Workflow:
        """Add a tool node calling `tool` (through the exactly-once journal)."""
        self._spec.nodes[name] = NodeSpec(tool=tool, args=args or {}, output=output, writes=[output or name])
        return self

    def interrupt(self, name: str, message: str, *, show: list[str] | None = None) -> Workflow:
        """Add a human-approval node: the run pauses here until approved or edited."""
        self._spec.nodes[name] = NodeSpec(interrupt=message, show=show or [], writes=[])
        return self

    def subgraph(self, name: str, workflow: Workflow | WorkflowSpec) -> Workflow:
        """Run another workflow as one node (it shares the state keys both declare)."""
        spec = workflow.spec if isinstance(workflow, Workflow) else workflow
        self._spec.nodes[name] = NodeSpec(subgraph=spec, writes=list(spec.state) or None)
        return self

    def search(self, name: str, workflow: Workflow | WorkflowSpec,
               settings: SearchSettings | Mapping[str, Any] | None = None, *, output: str | None = None,
               **options: Any) -> Workflow:
        """Add a search over `workflow` (`settings`, or keyword options: `SearchSettings` fields); the chosen
        branch's state keys become the run's, `output` names a state key for the search's report."""
        spec = workflow.spec if isinstance(workflow, Workflow) else workflow
        merged = {**(settings.model_dump() if isinstance(settings, SearchSettings) else dict(settings or {})),
                  **options}
        parse_search_settings(merged, f"node '{name}'")  # a typo fails here, where it was written
        self._spec.nodes[name] = NodeSpec(search=merged, subgraph=spec, output=output)
        return self

    def edge(self, source: str, target: str) -> Workflow:
        self._spec.edges.append((source, target))
        return self

    def start(self, name: str) -> Workflow:
        self._spec.start = name
        return self

    def route(self, source: str, on: str | Callable[[Any], Any], cases: dict[Any, str],
              default: str | None = None) -> Workflow:
        """Conditional edges: `on` is a state field or a callable of the state; its value picks a case."""
        self._spec.routes.append(
            RouteSpec(source=source, on=on, cases={str(k): v for k, v in cases.items()}, default=default)
        )
        return self

    def parallel(self, source: str, branches: list[str], join: str) -> Workflow:
        """Run `branches` concurrently after `source`, then `join` once all have finished."""
        self._spec.parallel.append(ParallelSpec(source=source, branches=list(branches), join=join))
        return self

    def tools(self, *packs: str) -> Workflow:
        self._spec.tools.extend(packs)
        return self

    @property
    def spec(self) -> WorkflowSpec:
        """The definition built so far (step_limit and interrupt_before applied)."""
        self._spec.step_limit = self.step_limit
        self._spec.interrupt_before = list(self.interrupt_before)
        return self._spec


def state_fields(state: type) -> dict[str, FieldSpec]:
    """Field specs of a TypedDict or pydantic model; `Annotated[list, operator.add]` marks a reducer."""
    fields: dict[str, FieldSpec] = {}
    reducer: Reducer | None
    model_fields = getattr(state, "model_fields", None)
    if model_fields is not None:  # pydantic model
        for name, info in model_fields.items():
            reducer = "add" if any(callable(m) for m in info.metadata) else None
            fields[name] = FieldSpec(type=_type_name(info.annotation), reducer=reducer)
        return fields
    for name, hint in typing.get_type_hints(state, include_extras=True).items():
        base, *meta = typing.get_args(hint) if typing.get_origin(hint) is typing.Annotated else (hint,)
        fields[name] = FieldSpec(type=_type_name(base), reducer="add" if any(callable(m) for m in meta) else None)
    return fields


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp) or tp
    return next((cls.__name__ for cls in (str, bool, int, float, list, dict) if origin is cls), "any")


def inferred_writes(fn: Callable[..., Any]) -> list[str] | None:
    """Keys a node writes, read from a TypedDict/pydantic return annotation; None when it cannot tell."""
    try:
        ret = typing.get_type_hints(fn).get("return")
    except (NameError, TypeError, AttributeError):  # unresolvable annotations: the writes stay unknown
        return None
    if ret is None or not isinstance(ret, type):
        return None
    if hasattr(ret, "model_fields"):
        return list(ret.model_fields)
    if hasattr(ret, "__annotations__") and issubclass(ret, dict):
        return list(typing.get_type_hints(ret))
    return None


__all__ = ["END", "Workflow", "inferred_writes", "state_fields"]
