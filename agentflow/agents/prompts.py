"""An agent's prompt templates, through the one prompt mechanism (`agentflow.models.templates`): a missing variable is
an error, not an empty string."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2

from agentflow.errors import ConfigError
from agentflow.models.templates import Templates

BUILTIN_PROMPTS = Path(__file__).resolve().parent / "prompts"


class PromptSet:
    """Renders the templates of one agent, looking in `dirs` first, then in the built-in prompt folder."""

    def __init__(self, dirs: Sequence[str | Path] = ()) -> None:
        self.templates = Templates([*dirs, BUILTIN_PROMPTS], block_lines=True)

    def render(self, name: str, **variables: Any) -> str:
        """Render template file `name` (e.g. `planner.system.md`)."""
        try:
            template = self.templates.get(name)
        except jinja2.TemplateNotFound:
            raise ConfigError(f"prompt template {name!r} not found (looked in {', '.join(self.templates.dirs)})",
                              hint="set prompt= to an existing name or add the file to a prompt_dirs folder") from None
        try:
            return template.render(**variables).strip()
        except jinja2.UndefinedError as exc:
            raise ConfigError(f"prompt template {name!r}: {exc.message}",
                              hint="pass that variable in the task dict") from None
