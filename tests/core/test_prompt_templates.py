"""The prompts moved from Python format strings into template files render byte for byte as before: the
expected strings in `tests/data/prompts_rendered.json` were captured from the format strings, for values
with braces, Jinja delimiters, trailing newlines and non-ASCII text, and for empty values (an empty list of
failures or constraints renders the text its call site passed in its place, now the template's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2
import pytest

from agentflow.instruct import nodes as instruct_nodes
from agentflow.models.templates import Templates, package_templates
from agentflow.reasoning import constraints

DATA = Path(__file__).resolve().parents[1] / "data"
PACKAGES = Path(__file__).resolve().parents[2] / "agentflow"
CASES: list[dict[str, Any]] = json.loads((DATA / "prompts_rendered.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['package']}.{c['name']}")
def test_migrated_prompt_renders_as_the_format_string_did(case: dict[str, Any]) -> None:
    templates = package_templates(str(PACKAGES / case["package"] / "__init__.py"))
    assert templates.render(f"{case['name']}.j2", **case["values"]) == case["rendered"]


def test_worked_examples_are_unchanged() -> None:
    """The shot templates (`*_shots.j2`) render, byte for byte, the worked examples the instruction-following
    and constraint agents were measured with (captured when they were still built in Python)."""
    shots = json.loads((DATA / "prompts_shots.json").read_text(encoding="utf-8"))
    assert [list(s) for s in constraints.EXTRACT_SHOTS] == shots["reasoning.EXTRACT_SHOT"]
    assert [list(s) for s in instruct_nodes.CHECK_SHOTS] == shots["instruct.CHECK_SHOTS"]
    assert [list(s) for s in instruct_nodes.FIX_SHOTS] == shots["instruct.FIX_SHOTS"]


def test_a_missing_value_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "ask.j2").write_text("Task: {{ task }}\n", encoding="utf-8")
    templates = Templates([tmp_path])
    assert templates.render("ask.j2", task="x") == "Task: x"
    with pytest.raises(jinja2.UndefinedError):
        templates.render("ask.j2")
    with pytest.raises(jinja2.UndefinedError):
        templates.render_text("{{ other }}")


REPAIR_CASES: list[dict[str, Any]] = json.loads((DATA / "repair_prompts_rendered.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", REPAIR_CASES, ids=lambda c: str(c["name"]))
def test_repair_prompt_renders_as_before(case: dict[str, Any]) -> None:
    """Every shipped repair prompt, through the one loader, as the repair's own Jinja environment rendered it."""
    from agentflow.repair.config import RepairConfig
    from agentflow.repair.edit.steps import render

    assert render(RepairConfig(), case["name"], case["values"]) == case["rendered"]


AGENT_CASES: list[dict[str, Any]] = json.loads((DATA / "agent_prompts_rendered.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", AGENT_CASES, ids=lambda c: str(c["name"]))
def test_agent_prompt_renders_as_before(case: dict[str, Any]) -> None:
    """Every built-in agent template, through the one loader, as the agents' own Jinja environment rendered it."""
    from agentflow.agents.prompts import PromptSet

    assert PromptSet().render(case["name"], **case["values"]) == case["rendered"]


PROSE_CASES: list[dict[str, Any]] = json.loads((DATA / "prose_rendered.json").read_text(encoding="utf-8"))


def _render_prose(case: dict[str, Any]) -> str:
    """A prompt once built in Python (a constant or an f-string), rendered the way its call site now does."""
    if case["name"] == "reproduce_previous":
        from agentflow.repair.edit.steps import previous_try

        return previous_try(**case["values"])
    templates = package_templates(str(PACKAGES / case["package"] / "__init__.py"))
    return templates.render(f"{case['name']}.j2", **case["values"])


@pytest.mark.parametrize("case", PROSE_CASES, ids=lambda c: f"{c['package']}.{c['name']}")
def test_prompt_once_built_in_python_renders_as_before(case: dict[str, Any]) -> None:
    assert _render_prose(case) == case["rendered"]


def test_the_schema_instruction_is_the_template_with_the_schema() -> None:
    from agentflow.models.backends.anthropic_backend import schema_instruction

    for case in (c for c in PROSE_CASES if c["name"] == "schema_instruction"):
        assert schema_instruction(json.loads(case["values"]["schema"])) == case["rendered"]


EMPTY_LISTS = [
    ("reasoning", "verify.j2", {"task": "t", "candidate": "c"}, "constraints", "(none listed: judge by the task)"),
    ("codegen", "debug.j2", {"prompt": "p", "code": "c", "trace": "x"}, "failures", "(none)"),
    ("instruct", "refine.j2", {"prompt": "p", "response": "r"}, "failures", "- (none listed)"),
    ("instruct", "reanswer.j2", {"prompt": "p", "response": "r"}, "failures", "- (none listed)"),
]


@pytest.mark.parametrize(("package", "name", "values", "key", "said"), EMPTY_LISTS, ids=lambda v: str(v))
def test_an_empty_list_is_said_by_the_template(package: str, name: str, values: dict[str, str], key: str,
                                               said: str) -> None:
    """What a prompt says for an empty list, once passed in by the code, is the template's: the prompt is the
    one the code rendered with that text as the value."""
    templates = package_templates(str(PACKAGES / package / "__init__.py"))
    assert said in templates.render(name, **values, **{key: ""})
    assert templates.render(name, **values, **{key: ""}) == templates.render(name, **values, **{key: said})
