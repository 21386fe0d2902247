"""Checkpoint values are data, never code: the serializer `AgentflowSaver` reads them back with.

LangGraph stores objects as msgpack extensions naming a `module:attr` it would import and call, so an edited
checkpoints.db could run code on resume. `StrictSerde` first checks every extension (nested ones included),
by name only, against LangGraph's safe types, `AGENTFLOW_TYPES` and the types the workflow declares
(`with_allowlist`); anything else is a `RefusedType` error before anything is imported or built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde._msgpack import SAFE_MSGPACK_METHODS, SAFE_MSGPACK_TYPES
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from agentflow.errors import UserError

# LangGraph's msgpack extension codes (langgraph.checkpoint.serde.jsonplus): the ones that name a type
_NAMED = {0, 1, 2, 4, 5}  # constructor with one arg / args / kwargs, pydantic v1 / v2
_METHOD = 3  # (module, name, arg, method): a classmethod call
_DELTA = 7  # a wrapper around another value
_PLAIN_TYPES = ("null", "bytes", "bytearray", "msgpack")
_OPT = ormsgpack.OPT_NON_STR_KEYS


class RefusedType(UserError):
    """A checkpoint names a type that agentflow and the workflow do not declare."""

    def __init__(self, name: str, *, where: str = "") -> None:
        self.type_name = name
        super().__init__(
            f"{where + ': ' if where else ''}refusing to load {name} from a checkpoint: not a type agentflow "
            "or the workflow declares (the file may have been edited)",
            hint="start a new run, or declare the type in the workflow's Python state class",
        )


AGENTFLOW_TYPES: frozenset[tuple[str, str]] = frozenset({
    ("agentflow.graph.run.outcome", "NodeError"),
    ("agentflow.budget", "BudgetUsage"),
})
"""The agentflow data classes a checkpoint may name besides what the workflow declares."""


class StrictSerde:
    """LangGraph's `JsonPlusSerializer` for writing; reading checks every named type first (see the module)."""

    def __init__(self, allowed: Iterable[tuple[str, ...] | type] = ()) -> None:
        self._allowed: set[tuple[str, ...]] = set(SAFE_MSGPACK_TYPES) | set(AGENTFLOW_TYPES)
        self._inner_size = -1
        self.allow(allowed)

    def allow(self, types: Iterable[tuple[str, ...] | type]) -> None:
        """Also load these `(module, name)` pairs (or classes)."""
        self._allowed |= {(t.__module__, t.__name__) if isinstance(t, type) else tuple(t) for t in types}
        # LangGraph's decoder gets the same list: it then builds these types without a warning per type
        if self._inner_size != len(self._allowed):
            self._inner = JsonPlusSerializer(allowed_msgpack_modules=tuple(self._allowed))
            self._inner_size = len(self._allowed)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self._inner.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, payload = data
        if type_ not in _PLAIN_TYPES:
            raise RefusedType(f"a value encoded as {type_!r}")
        if type_ == "msgpack" and (refused := self._refused(payload)) is not None:
            raise RefusedType(refused)
        return self._inner.loads_typed(data)

    def _refused(self, payload: bytes) -> str | None:
        """The first type `payload` names that may not be built, else None. Decodes without building anything."""
        refused: list[str] = []

        def check(code: int, data: bytes) -> None:
            # ormsgpack turns an exception raised here into a bare "ext_hook failed": note it and go on
            if code in _NAMED or code == _METHOD or code == _DELTA:
                inner = ormsgpack.unpackb(data, ext_hook=check, option=_OPT)
                if code != _DELTA and (verdict := self._verdict(code, inner)) is not None:
                    refused.append(verdict)

        try:
            ormsgpack.unpackb(payload, ext_hook=check, option=_OPT)
        except (ValueError, TypeError, ormsgpack.MsgpackDecodeError):
            return refused[0] if refused else "a value that is not valid msgpack"
        return refused[0] if refused else None

    def _verdict(self, code: int, tup: Any) -> str | None:
        if not isinstance(tup, (list, tuple)) or len(tup) < 3 or not all(isinstance(p, str) for p in tup[:2]):
            return "a malformed type reference"
        module, name = tup[0], tup[1]
        if code == _METHOD:
            method = tup[3] if len(tup) > 3 and isinstance(tup[3], str) else "?"
            return None if (module, name, method) in SAFE_MSGPACK_METHODS else f"{module}.{name}.{method}"
        return None if (module, name) in self._allowed else f"{module}.{name}"


def declared_types(graph: Any, also: Iterable[Any] = ()) -> set[tuple[str, ...]]:
    """The (module, name) of every class the graph's schemas (its subgraphs' too) and `also` refer to."""
    collect: Callable[..., set[tuple[str, ...]]]
    try:
        from langgraph._internal._serde import build_serde_allowlist as collect
    except ImportError:  # an older or newer LangGraph: the state schema class itself, nothing it refers to
        def collect(*, schemas: list[Any], channels: Any = None) -> set[tuple[str, ...]]:
            return {(s.__module__, s.__name__) for s in schemas if isinstance(s, type)}

    nodes = getattr(graph, "nodes", {}).values()
    schemas = [graph.state_schema, getattr(graph, "input_schema", None), getattr(graph, "output_schema", None)]
    schemas += [getattr(n, "input_schema", None) for n in nodes]
    schemas += list(also)
    found = set(collect(schemas=[s for s in schemas if s is not None], channels=getattr(graph, "channels", None)))
    for node in nodes:
        sub = getattr(getattr(node, "runnable", None), "builder", None)
        if sub is not None and hasattr(sub, "state_schema"):
            found |= declared_types(sub)
    return found


__all__ = ["AGENTFLOW_TYPES", "RefusedType", "StrictSerde", "declared_types"]
