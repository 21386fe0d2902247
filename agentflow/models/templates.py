"""The one prompt mechanism: prompt prose lives in Jinja template files beside the code that sends it (a
package's `prompts/` folder); code passes only values. StrictUndefined: a variable a template uses but the
caller did not pass is an error, never an empty string. Autoescape off: prompts are text, not HTML."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2


def _tojson(value: Any, indent: int | None = 2) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=False, default=str)


class Templates:
    """The templates of one folder list, first folder first. `block_lines` removes the line of a `{% ... %}`
    tag from the output (trim_blocks and lstrip_blocks), for templates written with block tags on their own
    lines. A file's one trailing newline is dropped, so a template file ends with a newline like any text file."""

    def __init__(self, dirs: Sequence[str | Path], *, block_lines: bool = False) -> None:
        self.dirs = [str(d) for d in dirs]
        self.env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False,
                                      trim_blocks=block_lines, lstrip_blocks=block_lines, autoescape=False)
        self.env.filters["tojson"] = _tojson
        self.loader = jinja2.FileSystemLoader(self.dirs)
        self.env.loader = self.loader
        self._from_text = lru_cache(maxsize=128)(self.env.from_string)

    def get(self, name: str) -> jinja2.Template:
        """Template file `name`; raises jinja2.TemplateNotFound."""
        return self.env.get_template(name)

    def source(self, name: str) -> str:
        """The text of template file `name`; raises jinja2.TemplateNotFound."""
        return self.loader.get_source(self.env, name)[0]

    def render(self, name: str, **values: Any) -> str:
        """Template file `name` rendered with `values`."""
        return self.get(name).render(**values)

    def shots(self, name: str, ask: str) -> list[tuple[str, str]]:
        """Worked examples, as (prompt, answer) turns: template file `name` sets `shots`, a list of the values
        template `ask` is rendered with, each with the model's `answer` to that prompt."""
        listed = self.get(name).module.shots  # type: ignore[attr-defined]  # the template's own `{% set %}`
        return [(self.render(ask, **{k: v for k, v in shot.items() if k != "answer"}), str(shot["answer"]))
                for shot in listed]

    def render_text(self, text: str, **values: Any) -> str:
        """Template `text` (a prompt a config gives in place of a shipped file) rendered with `values`."""
        return self._from_text(text).render(**values)


def package_templates(module_file: str) -> Templates:
    """The templates of the package holding `module_file` (its `prompts/` folder)."""
    return Templates([Path(module_file).resolve().parent / "prompts"])


MODEL_PROMPTS = package_templates(__file__)
"""The prompts the model layer itself sends (`models/prompts/*.j2`): the structured-output retry, the schema
instruction of backends without a JSON-schema mode."""
