"""From a Python signature to a JSON schema: a pydantic model of the arguments, and provider formats.

Parameter descriptions come from `Annotated[..., Field(description=...)]` first, then from the docstring
(Google `Args:`, Sphinx `:param x:` or NumPy `Parameters` sections). A parameter typed `ToolContext` is
the run context, not an argument: it is left out of the model and the schema.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from agentflow.tools.context import ToolContext

_HEADER = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|Returns?|Yields?|"
    r"Raises|Examples?|Notes?|See Also|Attributes|Warnings?|References)\s*:?\s*$",
    re.IGNORECASE,
)
_ARG_SECTIONS = {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments", "other parameters"}
_ITEM = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*(?::\s*(.*))?$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


class ArgsBase(BaseModel):
    """Base of generated argument models: unknown arguments are an error the model can read."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into (description, {parameter: description}).

    Understands Google (`Args:` + `name (type): text`), NumPy (`Parameters` + dashes + `name : type`
    then indented text) and Sphinx (`:param name: text`) styles.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    i = 0

    def underlined(at: int) -> bool:  # a NumPy section header: its next line is dashes
        return at + 1 < len(lines) and bool(lines[at + 1].strip()) and set(lines[at + 1].strip()) == {"-"}

    while i < len(lines):
        line = lines[i].strip()
        numpy = underlined(i)
        header = _HEADER.match(line)
        if header and (line.endswith(":") or numpy):
            i += 2 if numpy else 1
            body: list[str] = []
            while i < len(lines):
                nxt = lines[i].strip()
                if _HEADER.match(nxt) and (nxt.endswith(":") or underlined(i)):
                    break
                body.append(lines[i])
                i += 1
            if header.group(1).lower() in _ARG_SECTIONS:
                params.update(_parse_items(body, numpy=numpy))
            continue
        if line.startswith(":"):
            sphinx = _SPHINX_PARAM.match(line)
            i += 1
            if sphinx:
                text = [sphinx.group(2).strip()]
                while i < len(lines) and lines[i].strip() and not lines[i].strip().startswith(":"):
                    text.append(lines[i].strip())
                    i += 1
                params[sphinx.group(1)] = " ".join(t for t in text if t)
            continue
        summary.append(line)
        i += 1
    description = re.sub(r"\n{3,}", "\n\n", "\n".join(summary).strip())
    return description, {k: v for k, v in params.items() if v}


def _parse_items(body: list[str], *, numpy: bool) -> dict[str, str]:
    """Items of an arguments section: lines at the smallest indent start an item, deeper lines continue it."""
    filled = [line for line in body if line.strip()]
    if not filled:
        return {}
    base = min(len(line) - len(line.lstrip()) for line in filled)
    items: dict[str, str] = {}
    current: str | None = None
    for line in filled:
        indent = len(line) - len(line.lstrip())
        text = line.strip()
        match = _ITEM.match(text) if indent == base else None
        if match:
            current = match.group(1)
            items[current] = "" if numpy else (match.group(2) or "").strip()
        elif current is not None:
            items[current] = f"{items[current]} {text}".strip()
    return items


def _is_context(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if annotation is ToolContext or origin is ToolContext:  # origin: ToolContext[MyDeps]
        return True
    if origin is typing.Annotated:
        return _is_context(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return len(args) == 1 and _is_context(args[0])
    return False


def build_args_model(
    fn: Callable[..., Any], name: str, localns: dict[str, Any] | None = None
) -> tuple[type[BaseModel], str | None, dict[str, str], str]:
    """Pydantic model of `fn`'s arguments.

    Returns (model, name of the ToolContext parameter or None, {field name: parameter name}, docstring description).
    """
    description, doc_params = parse_docstring(fn.__doc__)
    try:
        hints = typing.get_type_hints(fn, localns=localns, include_extras=True)
    except Exception as exc:  # a NameError in a string annotation
        raise TypeError(f"tool {name!r}: cannot resolve its type hints ({exc})") from exc
    fields: dict[str, Any] = {}
    names: dict[str, str] = {}
    context_param: str | None = None
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(
                f"tool {name!r}: *args/**kwargs cannot be described to a model; name every parameter"
            )
        annotation = hints.get(param.name, Any)
        if _is_context(annotation):
            context_param = param.name
            continue
        default = param.default
        info = default if isinstance(default, FieldInfo) else Field(default=... if default is param.empty else default)
        if not _has_description(annotation, info) and param.name in doc_params:
            info = FieldInfo.merge_field_infos(info, Field(description=doc_params[param.name]))
        field_name = param.name
        if field_name.startswith(("model_", "_")) or hasattr(BaseModel, field_name):
            field_name = f"arg_{param.name.lstrip('_')}"
            info = FieldInfo.merge_field_infos(info, Field(alias=param.name))
        names[field_name] = param.name
        fields[field_name] = (annotation, info)
    model_name = "".join(part.capitalize() for part in re.split(r"[^0-9a-zA-Z]+", name) if part) + "Args"
    try:
        model = create_model(model_name, __base__=ArgsBase, **fields)
        model.model_json_schema()
    except Exception as exc:
        raise TypeError(f"tool {name!r}: its parameters cannot be turned into a JSON schema ({exc})") from exc
    return model, context_param, names, description


def _has_description(annotation: Any, info: FieldInfo) -> bool:
    if info.description:
        return True
    if typing.get_origin(annotation) is typing.Annotated:
        return any(isinstance(m, FieldInfo) and m.description for m in typing.get_args(annotation)[1:])
    return False


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The arguments schema as models see it: no titles, `$ref`s inlined where that is finite."""
    schema: dict[str, Any] = model.model_json_schema()
    defs = schema.pop("$defs", {})
    try:
        schema, defs = _inline(schema, defs), {}
    except _Recursive:
        pass
    schema = object_schema(schema)
    if defs:
        schema["$defs"] = _strip_titles(defs, in_properties=True)
    return schema


def object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's arguments schema as models see it: pydantic's titles dropped, an object."""
    out: dict[str, Any] = _strip_titles(schema)
    out["type"] = "object"
    out.setdefault("properties", {})
    return out


class _Recursive(Exception):
    """A `$ref` met again inside its own expansion: the schema keeps its `$defs`."""


def _inline(node: Any, defs: dict[str, Any], expanding: tuple[str, ...] = ()) -> Any:
    """`node` with every `$ref` replaced by a copy of its definition (its siblings kept)."""
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            name = node["$ref"].rsplit("/", 1)[-1]
            if name in expanding:
                raise _Recursive
            extra = {k: v for k, v in node.items() if k != "$ref"}
            return _inline({**defs[name], **extra}, defs, (*expanding, name))
        return {k: _inline(v, defs, expanding) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, defs, expanding) for v in node]
    return node


_LITERAL_KEYWORDS = {"default", "enum", "const", "examples"}


def _strip_titles(node: Any, *, in_properties: bool = False) -> Any:
    """Drop pydantic's auto titles (noise for a model); keep property *names* called `title`."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "title" and not in_properties and isinstance(value, str):
                continue
            if key in _LITERAL_KEYWORDS and not in_properties:  # values, not schemas: keep them as they are
                out[key] = value
                continue
            out[key] = _strip_titles(value, in_properties=key in ("properties", "$defs"))
        return out
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node
