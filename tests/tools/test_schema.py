"""JSON schemas from signatures and docstrings, and the provider export shapes."""

from __future__ import annotations

import enum
from typing import Annotated, Literal, Optional

import pytest
from pydantic import BaseModel, Field

from agentflow.tools import Tool, ToolContext, ToolRegistry, tool
from agentflow.tools.schema import parse_docstring


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: int = 0


class Shape(BaseModel):
    name: str
    points: list[Point]


class TreeNode(BaseModel):
    value: int
    children: list[TreeNode] = []


@tool
def everything(
    count: int,
    label: str = "none",
    ratio: Optional[float] = None,  # noqa: UP045 - the old spelling must work too
    mode: Literal["fast", "slow"] = "fast",
    color: Color = Color.RED,
    shape: Shape | None = None,
    tags: list[str] | None = None,
    limit: Annotated[int, Field(description="Upper bound from Annotated.", ge=1)] = 10,
    ctx: ToolContext | None = None,
) -> str:
    """Exercise every kind of parameter.

    A second paragraph of description.

    Args:
        count: How many things to make.
            The description continues here.
        label (str): A label for them.
        limit: This line loses to the Annotated description.

    Returns:
        Nothing interesting.
    """
    return "ok"


def test_types_defaults_and_required() -> None:
    params = everything.spec.parameters
    props = params["properties"]
    assert params["type"] == "object" and params["required"] == ["count"]
    assert params["additionalProperties"] is False
    assert props["count"]["type"] == "integer" and "default" not in props["count"]
    assert props["label"] == {"type": "string", "default": "none", "description": "A label for them."}
    assert {"type": "number"} in props["ratio"]["anyOf"] and {"type": "null"} in props["ratio"]["anyOf"]
    assert props["ratio"]["default"] is None
    assert props["tags"]["anyOf"][0] == {"type": "array", "items": {"type": "string"}}


def test_enums_and_literals() -> None:
    props = everything.spec.parameters["properties"]
    assert props["mode"]["enum"] == ["fast", "slow"] and props["mode"]["default"] == "fast"
    assert props["color"]["enum"] == ["red", "blue"] and props["color"]["default"] == "red"


def test_nested_models_are_inlined_without_titles() -> None:
    params = everything.spec.parameters
    assert "$defs" not in params and "$ref" not in str(params) and "title" not in str(params)
    shape = next(s for s in params["properties"]["shape"]["anyOf"] if s.get("type") == "object")
    assert shape["required"] == ["name", "points"]
    point = shape["properties"]["points"]["items"]
    assert point["properties"]["x"] == {"type": "integer"} and point["required"] == ["x"]


def test_recursive_models_keep_defs() -> None:
    @tool
    def walk(tree: TreeNode) -> int:
        """Sum a tree."""
        return tree.value

    params = walk.spec.parameters
    assert "TreeNode" in params["$defs"]
    assert params["properties"]["tree"] == {"$ref": "#/$defs/TreeNode"}


def test_docstring_descriptions_and_annotated_wins() -> None:
    props = everything.spec.parameters["properties"]
    assert everything.description == "Exercise every kind of parameter.\n\nA second paragraph of description."
    assert everything.summary == "Exercise every kind of parameter."
    assert props["count"]["description"] == "How many things to make. The description continues here."
    assert props["limit"]["description"] == "Upper bound from Annotated."
    assert props["limit"]["minimum"] == 1


def test_context_parameter_is_not_in_the_schema() -> None:
    assert "ctx" not in everything.spec.parameters["properties"]
    assert everything.context_param == "ctx"


def test_sphinx_and_numpy_docstrings() -> None:
    desc, params = parse_docstring(
        """Sphinx style.

        :param path: Where to look,
            relative to the root.
        :param int depth: How deep.
        :returns: the files
        """
    )
    assert desc == "Sphinx style." and params == {
        "path": "Where to look, relative to the root.",
        "depth": "How deep.",
    }
    desc, params = parse_docstring(
        """NumPy style.

        Parameters
        ----------
        path : str
            Where to look.
        depth : int, optional
            How deep.

        Returns
        -------
        list
        """
    )
    assert desc == "NumPy style." and params == {"path": "Where to look.", "depth": "How deep."}


def test_titles_are_dropped_but_title_properties_and_default_values_stay() -> None:
    class Doc(BaseModel):
        title: str
        meta: dict[str, str] = {"title": "untitled"}

    @tool
    def save(doc: Doc, title: str = "x", defaults: dict[str, str] = {"title": "kept"}) -> str:  # noqa: B006
        """Save a document."""
        return doc.title

    props = save.spec.parameters["properties"]
    assert set(props) == {"doc", "title", "defaults"} and props["defaults"]["default"] == {"title": "kept"}
    assert props["doc"]["properties"]["title"] == {"type": "string"}
    assert props["doc"]["properties"]["meta"]["default"] == {"title": "untitled"}


def test_names_that_shadow_pydantic_attributes_keep_their_names() -> None:
    @tool
    def dump(json: str, schema: int = 1, model_config: bool = False) -> dict:
        """Echo."""
        return {"json": json, "schema": schema, "model_config": model_config}

    assert set(dump.spec.parameters["properties"]) == {"json", "schema", "model_config"}
    assert dump.validate({"json": "x", "schema": 2}) is not None


def test_overrides_and_bad_definitions() -> None:
    @tool(name="renamed", description="Custom words.")
    async def original(a: int) -> int:
        return a

    assert isinstance(original, Tool) and original.name == "renamed" and original.is_async
    assert original.spec.description == "Custom words."

    def variadic(*args: int) -> None:
        """Takes anything."""

    with pytest.raises(TypeError, match="\\*args"):
        tool(variadic)
    with pytest.raises(ValueError, match="letters"):
        tool(name="has space")(lambda: None)


def test_openai_and_anthropic_export_shapes() -> None:
    registry = ToolRegistry([everything])
    (openai,) = registry.openai_tools()
    assert openai["type"] == "function"
    assert set(openai["function"]) == {"name", "description", "parameters"}
    assert openai["function"]["name"] == "everything"
    assert openai["function"]["parameters"] == everything.spec.parameters
    (anthropic,) = registry.anthropic_tools()
    assert set(anthropic) == {"name", "description", "input_schema"}
    assert anthropic["input_schema"] == everything.spec.parameters
    openai["function"]["parameters"]["properties"].clear()  # exports are copies
    assert everything.spec.parameters["properties"]


def test_the_decorated_function_still_works_directly() -> None:
    assert everything(3) == "ok"
