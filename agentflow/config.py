"""Configuration: pydantic models, YAML files and `-c key=value` overrides.

Every config class documents each field with a docstring (shown by `--help` and in the docs). Configs are
layered: defaults, then YAML files, then `-c key=value` overrides, in the order given on the command line.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from agentflow.errors import ConfigError, UserError, did_you_mean
from agentflow.secrets import redact, register_secrets_in

ModelT = TypeVar("ModelT", bound=BaseModel)


class StrictConfig(BaseModel):
    """Base of agentflow's config classes: unknown keys are an error, field docstrings are descriptions."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_assignment=True)


YAML_ALIAS_BUDGET = 100_000
"""How many nodes a YAML document's aliases may repeat in all (no shipped file uses one): past it, a document is
an alias bomb, 1 KB that every walk over the loaded value (validation, a JSON dump) meets a billion times."""


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that counts, while composing, how many nodes the document stands for with every
    alias expanded, and refuses it past `YAML_ALIAS_BUDGET` more than it holds (linear in the text)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._weights: dict[int, int] = {}
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        node = super().compose_node(parent, index)
        if id(node) in self._weights:  # an alias: the node composed at its anchor
            return node
        self._nodes += 1
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [item for pair in node.value for item in pair]
        else:
            children = []
        weight = 1 + sum(self._weights.get(id(child), 1) for child in children)
        self._weights[id(node)] = weight
        if weight > self._nodes + YAML_ALIAS_BUDGET:
            raise _AliasBomb
        return node


class _MalformedYAML(ConfigError):
    """The text is not YAML (a `-c` value then stands as the plain string it is)."""


class _AliasBomb(Exception):
    """A document whose aliases stand for more than `YAML_ALIAS_BUDGET` nodes it does not hold."""


def strategy_spelling(name: str) -> str:
    """A search strategy's name in the one spelling every place that reads one compares: case and `-`/`_`
    folded (`best-of-n`, `Best_Of_N` -> `best_of_n`), so a name the docs or a YAML spell one way is accepted
    spelt the other."""
    return name.strip().lower().replace("-", "_")


def load_yaml(text: str, source: str) -> Any:
    """`yaml.safe_load(text)` with bounded work: every YAML agentflow reads goes through here. Nesting too deep,
    an alias bomb and bad syntax are one-line `ConfigError`s that start with `source`."""
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    except _AliasBomb:
        raise ConfigError(f"{source}: its aliases (*name) repeat more than {YAML_ALIAS_BUDGET} values",
                          hint="write the values out instead of repeating anchors (&name)") from None
    except RecursionError:  # PyYAML's composer recurses once per nesting level
        raise ConfigError(f"{source}: nested too deeply to read", hint="flatten the YAML") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise _MalformedYAML(f"{source}:{where}: malformed YAML: {problem}", hint="fix the syntax") from None
    finally:
        loader.dispose()


def read_yaml(path: str | Path) -> Any:
    """Read a YAML file, turning every way it can fail into one-line `UserError`s."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{p}: file not found", hint="check the path") from None
    except IsADirectoryError:
        raise UserError(f"{p}: is a directory, expected a YAML file") from None
    except (PermissionError, UnicodeDecodeError) as exc:
        raise UserError(f"{p}: cannot read ({exc.__class__.__name__})") from None
    return load_yaml(text, str(p))


def parse_json(text: str, source: str) -> Any:
    """`json.loads(text)`, turning every way it can fail into a one-line `UserError` that starts with `source`
    (the file and line, e.g. `tasks.jsonl:3: malformed task line`)."""
    try:
        return json.loads(text)
    except RecursionError:  # the decoder recurses once per nesting level: `[[[[...` exhausts the stack
        raise UserError(f"{source}: nested too deeply to read", hint="flatten the JSON") from None
    except json.JSONDecodeError as exc:
        where = f"column {exc.colno}" if exc.lineno == 1 else f"line {exc.lineno} column {exc.colno}"
        raise UserError(f"{source}: {exc.msg} ({where})", hint="fix the JSON syntax") from None


def parse_override(item: str) -> tuple[list[str], Any]:
    """Parse `a.b.c=value`; the value is read as a YAML scalar/flow value (`3`, `true`, `[a, b]`, `x`)."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"bad override {item!r}: expected KEY=VALUE, e.g. -c agent.step_limit=20")
    try:
        value = load_yaml(raw, f"bad override {key!r}") if raw.strip() else ""
    except _MalformedYAML:
        value = raw
    return key.split("."), value


def deep_merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Merge `update` into a copy of `base`; nested mappings merge, everything else replaces."""
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def apply_overrides(data: Mapping[str, Any], items: Iterable[str]) -> dict[str, Any]:
    """Apply `-c` items in order: a YAML file path merges that file, `key=value` sets one field."""
    out = dict(data)
    for item in items:
        if "=" not in item:
            loaded = read_yaml(item)
            if loaded is None:
                continue
            if not isinstance(loaded, Mapping):
                raise ConfigError(f"{item}: expected a mapping at the top level of the config file")
            out = deep_merge(out, loaded)
            continue
        path, value = parse_override(item)
        node: dict[str, Any] = out
        for part in path[:-1]:
            child = node.get(part)
            child = dict(child) if isinstance(child, Mapping) else {}
            node[part] = child
            node = child
        node[path[-1]] = value
    return out


def validate_config(cls: type[ModelT], data: Mapping[str, Any], *, source: str = "config") -> ModelT:
    """Validate `data` as `cls`; the first problem becomes a one-line `ConfigError` naming the key. Secrets in
    `data` (an `api_key`, a password in a URL, ...) are registered first: every file of the run redacts them."""
    register_secrets_in(data)
    try:
        return cls.model_validate(data)
    except RecursionError:
        raise ConfigError(f"{source}: nested too deeply to validate", hint="flatten the config") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        near = extra_key_hint(cls, err)
        raise ConfigError(f"{source}: {loc}: {err['msg']}{near}{more}") from None


def extra_key_hint(cls: type[BaseModel], err: Mapping[str, Any]) -> str:
    """For pydantic's "Extra inputs are not permitted": `; did you mean 'step_limit'?` naming the nearest field
    of the model the unknown key sits in (found by walking `cls` along the error's location), else ''."""
    if err.get("type") != "extra_forbidden" or not err.get("loc"):
        return ""
    *path, key = err["loc"]
    models = [cls]
    for part in path:
        models = [inner for model in models for inner in _inner_types(model, part)]
    fields = [name for model in models for name in getattr(model, "model_fields", {})]
    return did_you_mean(key, fields)


def _inner_types(tp: Any, part: Any) -> list[Any]:
    """The types one step into `tp` along a pydantic error location part (a field, an index, a dict key or a
    union member's tag), with Optional/Union/Annotated unwrapped."""
    out: list[Any] = []
    for option in _options(tp):
        fields = getattr(option, "model_fields", None)
        origin = typing.get_origin(option)
        args = typing.get_args(option)
        if isinstance(fields, dict) and isinstance(part, str) and part in fields:
            out.extend(_options(fields[part].annotation))
        elif isinstance(part, str) and getattr(option, "__name__", None) == part:
            out.append(option)  # a union member's tag
        elif isinstance(part, int) and origin in (list, tuple, set, frozenset) and args:
            out.extend(_options(args[0]))
        elif isinstance(part, str) and origin in (dict, Mapping) and len(args) == 2:
            out.extend(_options(args[1]))
    return out


def _options(tp: Any) -> list[Any]:
    """`tp` with Annotated, Optional and unions unwrapped into the types it may be."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _options(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return [o for arg in typing.get_args(tp) for o in _options(arg)]
    return [tp]


def load_config(cls: type[ModelT], overrides: Iterable[str] = (), base: Mapping[str, Any] | None = None) -> ModelT:
    """Defaults of `cls`, then `base`, then each `-c` item, validated once at the end."""
    return validate_config(cls, apply_overrides(dict(base or {}), overrides))


def dump_yaml(config: BaseModel | Mapping[str, Any]) -> str:
    """YAML of a config as resolved, secrets redacted."""
    data = config.model_dump(mode="json") if isinstance(config, BaseModel) else config
    return yaml.safe_dump(redact(data), sort_keys=False)


def cache_dir() -> Path:
    """Where agentflow keeps assembled models, built binaries and response caches."""
    root = os.environ.get("AGENTFLOW_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "agentflow"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created with its folder) while the block runs: one process at a time
    builds what the block builds. Closing the file releases the lock."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield
