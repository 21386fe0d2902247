"""Prompt templates are files (jinja2, StrictUndefined): a missing variable is an error, not an empty string."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2

from agentflow.errors import ConfigError

BUILTIN_PROMPTS = Path(__file__).resolve().parent / "prompts"


class PromptSet:
    """Renders the templates of one agent, looking in `dirs` first, then in the built-in prompt folder."""

    def __init__(self, dirs: Sequence[str | Path] = ()) -> None:
        search = [str(d) for d in dirs] + [str(BUILTIN_PROMPTS)]
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(search),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=False,
            trim_blocks=True,
            lstrip_blocks=True,
            autoescape=False,
        )
        self.env.filters["tojson"] = _tojson

    def render(self, name: str, **variables: Any) -> str:
        """Render template file `name` (e.g. `planner.system.md`)."""
        try:
            template = self.env.get_template(name)
        except jinja2.TemplateNotFound:
            raise ConfigError(
                f"prompt template {name!r} not found (looked in {', '.join(self.env.loader.searchpath)})",  # type: ignore[union-attr]
                hint="set prompt= to an existing name or add the file to a prompt_dirs folder",
            ) from None
        try:
            return template.render(**variables).strip()
        except jinja2.UndefinedError as exc:
            raise ConfigError(
                f"prompt template {name!r}: {exc.message}", hint="pass that variable in the task dict"
            ) from None


def _tojson(value: Any, indent: int | None = 2) -> str:
    import json

    return json.dumps(value, indent=indent, ensure_ascii=False, default=str)
