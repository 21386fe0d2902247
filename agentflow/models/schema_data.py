"""Data that validates against a JSON schema, made up deterministically (what `TestModel` sends as tool
arguments and answers with).

Covers what pydantic and tool signatures produce: objects (required properties only, so optional ones keep
their defaults), arrays and tuples (`prefixItems`), strings with length limits and common formats, numbers
with bounds and `multipleOf`, booleans, null, `enum` / `const`, `anyOf` / `oneOf` (the first option that is
not null), `allOf`, and `$ref` into `$defs` (a recursive schema stops at the first optional branch past a
few levels). A `pattern` is not followed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

MAX_DEPTH = 6
"""Levels of nested `$ref`s followed before a recursive schema is cut short (null, [] or {} where allowed)."""

_FORMATS = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "12:00:00",
    "duration": "PT1S",
    "email": "user@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "12345678-1234-4234-8234-123456789abc",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "hostname": "example.com",
}


def sample(schema: Mapping[str, Any], *, seed: int = 0) -> Any:
    """A value valid against `schema`; the same schema and seed give the same value."""
    return _Sampler(schema, seed).value(schema, 0)


class _Sampler:
    def __init__(self, root: Mapping[str, Any], seed: int) -> None:
        self.defs: Mapping[str, Any] = root.get("$defs") or root.get("definitions") or {}
        self.counter = seed

    def _next(self) -> int:
        n = self.counter
        self.counter += 1
        return n

    def _resolve(self, ref: str) -> Mapping[str, Any]:
        name = ref.rsplit("/", 1)[-1]
        found = self.defs.get(name)
        if found is None:
            raise ValueError(f"JSON schema reference {ref!r} is not in $defs")
        return found  # type: ignore[no-any-return]

    def value(self, schema: Mapping[str, Any], depth: int) -> Any:
        if "$ref" in schema:
            if depth >= MAX_DEPTH:
                return self._shortest(self._resolve(schema["$ref"]))
            return self.value(self._resolve(schema["$ref"]), depth + 1)
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            options = schema["enum"]
            return options[self._next() % len(options)]
        for key in ("anyOf", "oneOf"):
            if schema.get(key):
                return self.value(self._option(schema[key], depth), depth)
        if schema.get("allOf"):
            merged: dict[str, Any] = {}
            for part in schema["allOf"]:
                part = self._resolve(part["$ref"]) if "$ref" in part else part
                merged.update(part)
            return self.value({**merged, **{k: v for k, v in schema.items() if k != "allOf"}}, depth)
        kind = _type_of(schema)
        maker = getattr(self, f"_{kind}", None)
        return maker(schema, depth) if maker is not None else self._string(schema, depth)

    def _option(self, options: list[Mapping[str, Any]], depth: int) -> Mapping[str, Any]:
        """The first option that is not null; null itself once deep inside a recursive schema."""
        non_null = [o for o in options if o.get("type") != "null"]
        if not non_null or (depth >= MAX_DEPTH - 1 and len(non_null) < len(options)):
            return {"type": "null"}
        return non_null[0]

    def _shortest(self, schema: Mapping[str, Any]) -> Any:
        kind = _type_of(schema)
        return {"array": [], "object": {}, "null": None}.get(kind, self.value(schema, MAX_DEPTH))

    def _object(self, schema: Mapping[str, Any], depth: int) -> dict[str, Any]:
        properties: Mapping[str, Any] = schema.get("properties") or {}
        return {name: self.value(properties.get(name, {}), depth) for name in schema.get("required", [])}

    def _array(self, schema: Mapping[str, Any], depth: int) -> list[Any]:
        prefix = [self.value(item, depth) for item in schema.get("prefixItems", [])]
        items = schema.get("items", None if prefix else {})
        if not isinstance(items, Mapping):  # a closed tuple (`items: false`) or a tuple without extra items
            return prefix
        count = max(int(schema.get("minItems", 1)), 1) - len(prefix)
        if "maxItems" in schema:
            count = min(count, int(schema["maxItems"]) - len(prefix))
        return prefix + [self.value(items, depth) for _ in range(max(count, 0))]

    def _string(self, schema: Mapping[str, Any], depth: int) -> str:
        fixed = _FORMATS.get(str(schema.get("format", "")))
        if fixed is not None:
            return fixed
        n = self._next()
        text = ""
        while True:  # spreadsheet-column letters: a, b, ... z, aa, ab, ...
            text = chr(ord("a") + n % 26) + text
            n = n // 26 - 1
            if n < 0:
                break
        low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
        text = text.ljust(low, "a")
        return text[: int(high)] if high is not None else text

    def _integer(self, schema: Mapping[str, Any], depth: int) -> int:
        low, high = _bounds(schema, step=1)
        step = schema.get("multipleOf", 1)
        start = math.ceil(low / step) * step if low is not None else 0
        if high is not None and start > high:
            start = math.floor(high / step) * step
        value = start + self._next() * step
        if high is not None and value > high:
            value = start
        return int(value)

    def _number(self, schema: Mapping[str, Any], depth: int) -> float:
        if "multipleOf" in schema:
            return float(self._integer(schema, depth))
        low, high = _bounds(schema, step=0.0)
        value = float(self._next()) if low is None else low + float(self._next())
        if high is not None and value > high:
            value = low if low is not None else high
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"] or (
            "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]
        ):
            lo = schema.get("exclusiveMinimum", schema.get("minimum", value - 2))
            hi = schema.get("exclusiveMaximum", schema.get("maximum", value + 2))
            value = (lo + hi) / 2
        return value

    def _boolean(self, schema: Mapping[str, Any], depth: int) -> bool:
        return self._next() % 2 == 0

    def _null(self, schema: Mapping[str, Any], depth: int) -> None:
        return None


def _type_of(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        if "properties" in schema:
            return "object"
        if "items" in schema or "prefixItems" in schema:
            return "array"
        return "string"
    return str(kind)


def _bounds(schema: Mapping[str, Any], *, step: float) -> tuple[Any, Any]:
    """The inclusive (low, high) an integer (step 1) may take; exclusive limits moved in by `step`."""
    low = schema.get("minimum")
    if "exclusiveMinimum" in schema:
        low = schema["exclusiveMinimum"] + step
    high = schema.get("maximum")
    if "exclusiveMaximum" in schema:
        high = schema["exclusiveMaximum"] - step
    return low, high


__all__ = ["MAX_DEPTH", "sample"]
