"""The trust boundary of `agentflow mcp serve`: what a client holding the token may choose, checked before
any job starts.

- The model is the server's: `repair` and `run_workflow` run with the server's `--model` (or their shipped
  defaults), or with a spec its user listed with `--allow-model`. The jobs use the server's API keys, so a
  client-named spec (an `openai-compatible:` URL of its own) would receive them along with the served code.
- The served folder is the only host folder a job touches: every path in a `run_workflow` input is resolved
  against it (symlinks too) and must lie inside it; the job gets the resolved absolute path.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse

from agentflow.errors import ToolError, UserError
from agentflow.mcp_server.config import McpServeConfig

_MODEL_WORDS = ("model", "base_url", "api_base", "api_key", "header", "endpoint", "serve")
"""Option names that would choose a model or where its requests go (`critic_model`, `model_options.base_url`)."""
_PATH_KEYS = {"repo", "repository", "workspace", "path", "paths", "dir", "directory", "folder", "file", "files",
              "filename", "cwd", "root", "wheelhouse"}
_PATH_SUFFIXES = ("_path", "_paths", "_dir", "_file", "_files", "_folder", "_repo")


def check_models(cfg: McpServeConfig) -> None:
    """The server's own and allowed model specs are well formed (a UserError at start, not at a client's call)."""
    from agentflow.models.spec import parse_spec

    given = [("--model", cfg.model)] if cfg.model else []
    for flag, spec in given + [("--allow-model", spec) for spec in cfg.allowed_models]:
        try:
            parse_spec(spec)
        except UserError as exc:
            raise UserError(f"agentflow mcp serve {flag}: {exc}") from None


def job_model(cfg: McpServeConfig, arguments: dict[str, Any]) -> str | None:
    """The model a `repair` / `run_workflow` call runs with: the server's, unless the client names one of the
    allowed specs. Anything else, and any option choosing a model or endpoint, is a ToolError."""
    options = arguments.get("options")
    for key in options if isinstance(options, dict) else {}:
        if any(word in str(key).lower() for word in _MODEL_WORDS):
            raise ToolError(f"option {key!r} is refused: the model is the server's choice "
                            f"({_served(cfg)}); a client cannot set it, its options or its endpoint")
    requested = arguments.get("model")
    if requested is None:
        return cfg.model
    allowed = ([cfg.model] if cfg.model else []) + cfg.allowed_models
    if isinstance(requested, str) and requested.strip() in allowed:
        return requested.strip()
    raise ToolError(f"model {requested!r} is not allowed: the model is the server's choice ({_served(cfg)}); "
                    "its user can allow more with `agentflow mcp serve --allow-model SPEC`")


def _served(cfg: McpServeConfig) -> str:
    own = f"it runs {cfg.model}" if cfg.model else "it runs the jobs' default models"
    allowed = ", ".join(cfg.allowed_models)
    return own + (f"; a client may also name {allowed}" if allowed else "")


def confine_input(root: Path, value: Any, key: str | None = None) -> Any:
    """`value` (a `run_workflow` input) with every path in it resolved inside `root`, the served folder: the
    strings under path-named keys (`repo`, `workspace`, `*_path`, ...) and any string that reads as a host
    path (absolute, `~`, `file:`, or climbing with `..`). A path outside `root` is a ToolError."""
    if isinstance(value, dict):
        return {k: confine_input(root, v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [confine_input(root, v, key) for v in value]
    if not isinstance(value, str):
        return value
    if key == "tasks" and value.strip():
        raise ToolError("input 'tasks' is refused: a tasks file names repositories anywhere (folders, git URLs); "
                        "a repair workflow served over MCP works on the served folder: give "
                        '{"repo": ".", "issue": TEXT}')
    if (_path_key(key) and "\n" not in value) or _looks_like_path(value):
        return str(inside(root, value, key or "input"))
    return value


def inside(root: Path, value: str, key: str) -> Path:
    """`value` as a path relative to `root` (`~` and `file:` expanded), resolved (symlinks too); a ToolError
    unless it lies inside `root`."""
    text = unquote(urlparse(value).path) if value.startswith("file:") else value
    try:
        path = (root / Path(text).expanduser()).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop, an unknown ~user
        raise ToolError(f"input '{key}': {value!r} cannot be resolved ({exc.__class__.__name__})") from None
    if not path.is_relative_to(root):
        raise ToolError(f"input '{key}': {value!r} is outside the served folder {root} (resolved: {path}); "
                        "run_workflow works on the served folder only: give a path inside it, relative to it")
    return path


def _path_key(key: str | None) -> bool:
    name = (key or "").lower()
    return name in _PATH_KEYS or name.endswith(_PATH_SUFFIXES)


def _looks_like_path(value: str) -> bool:
    if not value or any(c.isspace() for c in value):
        return False
    return value.startswith(("/", "~", "file:")) or ".." in PurePosixPath(value).parts
