"""Checkpoint bytes hold no secret, whatever the type of the value they encode: the saver redacts what the
serializer produced (an exception, a model or a message would escape a walker of known types).
`redact_serialized` looks for a secret in the bytes and only then decodes the msgpack (building nothing),
masks every string and encodes it again; values under `CODE_KEYS` (patches) lose known secrets only.
"""

from __future__ import annotations

from typing import Any

import ormsgpack

from agentflow.secrets import CODE_KEYS, Redactor, Redactors, redactors

_OPT = ormsgpack.OPT_NON_STR_KEYS


class SecretLeft(RuntimeError):
    """A serialized value still held a known secret after redaction: it is not written."""


def redact_serialized(type_: str, data: bytes, current: Redactors | None = None) -> bytes:
    """`data` (a value serialized as `type_` by LangGraph's serializer) with every secret masked; the same object
    when it holds none. `current`: `secrets.redactors()`, when the caller has it already."""
    current = current or redactors()
    if type_ == "null" or not current.holds(data):
        return data
    full, code = current.full, current.code
    out = _redact_msgpack(data, full, code) if type_ == "msgpack" else full(data)
    if code(out) != out:  # a known secret the decoding did not reach (it cannot be masked in place)
        raise SecretLeft(f"a checkpoint value ({type_}) still holds a secret after redaction; not written")
    return out


def _redact_msgpack(data: bytes, full: Redactor, code: Redactor) -> bytes:
    changed = False

    def ext(tag: int, inner: bytes) -> ormsgpack.Ext:
        nonlocal changed
        clean = _redact_msgpack(inner, full, code)
        changed = changed or clean is not inner
        return ormsgpack.Ext(tag, clean)

    tree = ormsgpack.unpackb(data, ext_hook=ext, option=_OPT)
    clean_tree = _walk(tree, full, code, False)
    if clean_tree is tree and not changed:
        return data
    return ormsgpack.packb(clean_tree, option=_OPT)


def _walk(value: Any, full: Redactor, code: Redactor, is_code: bool) -> Any:
    """`value` with its strings (and bytes) redacted; the same object when nothing in it changed."""
    if isinstance(value, (str, bytes)):
        new = code(value) if is_code else full(value)
        return value if new == value else new
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        changed = False
        for k, v in value.items():
            new_k = _walk(k, full, code, False)
            new_v = _walk(v, full, code, k in CODE_KEYS)
            changed = changed or new_k is not k or new_v is not v
            out[new_k] = new_v
        return out if changed else value
    if isinstance(value, list):
        items = [_walk(v, full, code, is_code) for v in value]
        return items if any(n is not o for n, o in zip(items, value, strict=True)) else value
    return value  # numbers, None, booleans and extensions (already redacted inside by `ext`)
