"""User code next to a workflow file: `fn: gates:review_gate`, `tools: [mytools]` and `path/to/file.py:func`
work without PYTHONPATH.

A name whose module is a file (or package) in the workflow's folder is rewritten, when the workflow is loaded,
to that file's path (`/abs/dir/gates.py:review_gate`); such paths are imported by file location under a
private module name, once per process. Names that are not next to the workflow stay import paths.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentflow.graph.define.spec import WorkflowSpec


def is_file_path(module: str) -> bool:
    return module.endswith(".py")


def _local_file(base: Path, module: str) -> Path | None:
    """The file in `base` that `module` (dotted, or a relative .py path) names, if there is one."""
    if is_file_path(module):
        candidate = base / module
        return candidate if candidate.is_file() else None
    parts = module.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    try:
        if importlib.util.find_spec(parts[0]) is not None:
            return None  # importable as it is: the import path wins
    except (ImportError, ValueError):
        pass
    return folder_module(base, module)


def folder_module(base: Path, module: str) -> Path | None:
    """The file in `base` that holds the dotted module `module` (`a.b` -> a/b.py or a/b/__init__.py)."""
    parts = module.split(".")
    for candidate in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
        if candidate.is_file():
            return candidate
    return None


def localize_path(value: Any, base: Path) -> Any:
    """`mod:attr` -> `/abs/base/mod.py:attr` when mod is a file in `base` (a `file.py:attr` always: in `base`);
    anything else unchanged."""
    if not isinstance(value, str) or ":" not in value:
        return value
    module, _, attr = value.partition(":")
    found = _local_file(base, module)
    if found is None and is_file_path(module):
        return f"{localize_file(module, base)}:{attr}"  # missing: named where it was looked for, not found elsewhere
    return f"{found.resolve()}:{attr}" if found is not None else value


def localize_pack(pack: str, base: Path) -> str:
    """A tool pack name that is a file (or relative .py path) in `base` -> its absolute path."""
    found = _local_file(base, pack)
    if found is None and is_file_path(pack):
        return localize_file(pack, base)
    if found is None or found.name == "__init__.py":
        return pack
    return str(found.resolve())


def localize(spec: WorkflowSpec, base: Path) -> None:
    """Resolve every path of a workflow loaded from a file against its folder `base`: fn:, route on:, tools:
    and agent tool packs that live there become file paths, and the file paths it gives (`replay:` model
    cassettes, agent YAML files, `prompt_dirs`, MCP servers' `cwd` and the files their command names, inline
    subgraphs' own) become absolute. Nothing is resolved against the current folder."""
    spec.tools = [localize_pack(p, base) for p in spec.tools]
    spec.model = localize_model(spec.model, base)
    for node in spec.nodes.values():
        node.fn = localize_path(node.fn, base)
        if node.agent is not None:
            _localize_agent(node, base)
        sub = node.subgraph
        if sub is not None and str(getattr(sub, "source_path", "")).startswith(f"{spec.source_path}: "):
            localize(sub, base)  # written inline: its paths are this file's (a subgraph file was done on load)
    for route in spec.routes:
        route.on = localize_path(route.on, base)
    spec.mcp_servers = [_localize_server(server, base) for server in spec.mcp_servers]


def localize_file(value: str, base: Path) -> str:
    """A relative file or folder path -> its absolute path in `base` (`~` expanded; absolute paths unchanged)."""
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else (base / path).resolve())


def localize_model(spec: Any, base: Path) -> Any:
    """`replay:cassette.json` -> `replay:/abs/base/cassette.json`, `function:helpers.py:reply` (or
    `function:helpers:reply` for a helpers.py in `base`) -> `function:/abs/base/helpers.py:reply`; any other
    model spec unchanged."""
    if isinstance(spec, str) and spec.strip().startswith("function:"):
        return f"function:{localize_path(spec.strip().removeprefix('function:').strip(), base)}"
    if not isinstance(spec, str) or not spec.strip().startswith("replay:"):
        return spec
    rest = spec.strip().removeprefix("replay:").strip()
    return f"replay:{localize_file(rest, base)}" if rest else spec


def _localize_agent(node: Any, base: Path) -> None:
    """An agent node's paths: its agent YAML file, `args.model`, and `args.config` tools, prompt_dirs, model."""
    agent = str(node.agent)
    if Path(agent).suffix in (".yaml", ".yml") or (base / agent).is_file():
        node.agent = localize_file(agent, base)
    if "model" in node.args:
        node.args["model"] = localize_model(node.args["model"], base)
    config = node.args.get("config")
    if not isinstance(config, dict):
        return
    if isinstance(config.get("tools"), list):
        config["tools"] = [localize_pack(p, base) if isinstance(p, str) else p for p in config["tools"]]
    if isinstance(config.get("prompt_dirs"), list):
        config["prompt_dirs"] = [localize_file(d, base) if isinstance(d, str) else d for d in config["prompt_dirs"]]
    if "model" in config:
        config["model"] = localize_model(config["model"], base)


def _localize_server(server: Any, base: Path) -> Any:
    """An MCP server's relative `cwd` in `base`; without a `cwd`, the files its command names that are in `base`
    (`python my_server.py`) become absolute, so it starts from any folder."""
    if server.cwd is not None:
        return server.model_copy(update={"cwd": localize_file(server.cwd, base)})
    if server.command is None:
        return server
    argv = list(server.command)
    for i, word in enumerate(argv):
        is_path = i > 0 or "/" in word  # the program itself only when written as a path (./serve.sh)
        if is_path and not word.startswith("-") and not Path(word).is_absolute() and (base / word).is_file():
            argv[i] = str((base / word).resolve())
    return server.model_copy(update={"command": argv})


__all__ = ["folder_module", "is_file_path", "localize", "localize_file", "localize_model",
           "localize_pack", "localize_path"]
