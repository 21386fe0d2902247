"""The test models: data made up from JSON schemas validates against them; `TestModel` calls each offered tool
once then answers from the output schema; `FunctionModel` turns what a user function returns into replies;
both load from spec strings (`test`, `function:`)."""

from __future__ import annotations

import datetime as dt
import enum
import json
import uuid
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from agentflow.errors import ModelError, UserError
from agentflow.models import ChatModel, ChatRequest, ChatResponse, Message, ToolCall, ToolSpec, load_model
from agentflow.models.schema_data import sample
from agentflow.models.spec import parse_spec
from agentflow.models.testing import NO_TOOL_CALLS, FunctionModel, TestModel, tool_call
from agentflow.tools import ToolRegistry, tool


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    street: Annotated[str, Field(min_length=12, max_length=20)]
    number: Annotated[int, Field(gt=100, le=102)]


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: Annotated[int, Field(ge=1, le=9, multiple_of=3)]


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Tree(BaseModel):
    label: str
    children: list[Tree] = []
    parent: Tree | None


class Everything(BaseModel):
    name: str
    ratio: Annotated[float, Field(gt=0, lt=1)]
    score: Annotated[float, Field(ge=10.5)]
    tags: Annotated[list[str], Field(min_length=3, max_length=3)]
    unique: set[int]
    pair: tuple[int, str]
    color: Color
    mode: Literal["a", "b"]
    when: dt.datetime
    day: dt.date
    ident: uuid.UUID
    address: Address
    pet: Annotated[Cat | Dog, Field(discriminator="kind")]
    maybe: int | None
    mapping: dict[str, int]
    anything: Any
    tree: Tree
    optional_note: str = "kept default"


@pytest.mark.parametrize("model", [Everything, Address, Cat, Dog, Tree])
@pytest.mark.parametrize("seed", [0, 1, 7, 30])
def test_made_up_data_validates_against_its_schema(model: type[BaseModel], seed: int) -> None:
    data = sample(model.model_json_schema(), seed=seed)
    value = model.model_validate(data)  # raises if the data breaks the schema
    assert value is not None
    assert sample(model.model_json_schema(), seed=seed) == data  # deterministic


def test_made_up_data_fills_required_fields_only_and_varies_with_the_seed() -> None:
    data = sample(Everything.model_json_schema(), seed=0)
    assert "optional_note" not in data and len(data["tags"]) == 3 and len(data["address"]["street"]) >= 12
    assert sample(Everything.model_json_schema(), seed=5) != data


def _request(*messages: Message, tools: list[ToolSpec] | None = None, schema: type[BaseModel] | None = None,
             n: int = 1) -> ChatRequest:
    return ChatRequest(messages=list(messages) or [Message.user("hi")], tools=tools or [], n=n,
                       response_schema=schema.model_json_schema() if schema else None)


@tool
def convert(value: float, unit: Literal["km", "mi"], precise: bool = False) -> str:
    """Convert a distance."""
    return f"{value} {unit}"


@tool
def lookup(key: Annotated[str, Field(min_length=4)]) -> str:
    """Look a key up."""
    return key


SPECS = ToolRegistry([convert, lookup]).specs()


async def test_test_model_calls_each_offered_tool_once_then_answers() -> None:
    model = TestModel()
    first = await model.chat(_request(tools=SPECS))
    calls = first.message.tool_calls
    assert [c.name for c in calls] == ["convert", "lookup"] and first.choices[0].finish_reason == "tool_calls"
    for call in calls:  # arguments the tools' own validation accepts
        (convert if call.name == "convert" else lookup).validate(call.arguments)
    assert len({c.id for c in calls}) == 2 and all(c.id for c in calls)

    history = [Message.user("hi"), first.message,
               Message.tool(calls[0].id, "convert", "1.0 km"), Message.tool(calls[1].id, "lookup", "aaaa")]
    final = await model.chat(_request(*history, tools=SPECS))
    assert not final.message.tool_calls and final.choices[0].finish_reason == "stop"
    assert json.loads(final.text) == {"convert": "1.0 km", "lookup": "aaaa"}
    assert len(model.requests) == 2 and model.last_request.messages[-1].name == "lookup"


async def test_test_model_answers_from_the_schema_the_text_or_the_given_output() -> None:
    assert (await TestModel().chat(_request())).text == NO_TOOL_CALLS
    structured = await TestModel().chat(_request(schema=Address))
    Address.model_validate_json(structured.text)
    assert (await TestModel(text="fine").chat(_request())).text == "fine"
    given = Address(street="Long Street 12", number=101)
    assert Address.model_validate_json((await TestModel(output=given).chat(_request(schema=Address))).text) == given


async def test_test_model_calls_only_the_tools_it_is_told_to() -> None:
    only = await TestModel(call_tools=["lookup"]).chat(_request(tools=SPECS))
    assert [c.name for c in only.message.tool_calls] == ["lookup"]
    none = await TestModel(call_tools="none").chat(_request(tools=SPECS))
    assert none.text == NO_TOOL_CALLS and not none.message.tool_calls
    refused = await TestModel().chat(_request(tools=SPECS).model_copy(update={"tool_choice": "none"}))
    assert not refused.message.tool_calls


async def test_test_model_usage_streaming_and_samples() -> None:
    model: ChatModel = TestModel(text="three small words")
    response = await model.chat(_request(n=2))
    assert [c.message.content for c in response.choices] == ["three small words"] * 2
    assert response.usage.output_tokens == 6 and response.usage.input_tokens == 1
    assert response.usage.cost_usd == 0.0
    pieces = [d async for d in model.stream(_request())]
    assert [p.text for p in pieces[:-1]] == ["three ", "small ", "words"]
    assert pieces[-1].response is not None and pieces[-1].response.text == "three small words"


async def test_function_model_turns_each_kind_of_return_into_a_reply() -> None:
    replies: list[Any] = [
        "plain text",
        Address(street="Long Street 12", number=101),
        {"a": 1},
        tool_call("lookup", key="abcd"),
        [tool_call("lookup", {"key": "abcd"}), tool_call("convert", value=1, unit="km")],
        Message.assistant("a message"),
        ChatResponse(choices=[{"message": Message.assistant("whole"), "finish_reason": "length"}]),  # type: ignore[list-item]
    ]

    async def reply(request: ChatRequest) -> Any:  # async functions are awaited
        return replies[len(model.requests) - 1]

    model = FunctionModel(reply)
    got = [await model.chat(_request()) for _ in replies]
    assert got[0].text == "plain text" and got[0].choices[0].finish_reason == "stop"
    assert Address.model_validate_json(got[1].text).number == 101
    assert json.loads(got[2].text) == {"a": 1}
    assert got[3].message.tool_calls[0].arguments == {"key": "abcd"}
    assert got[3].choices[0].finish_reason == "tool_calls"
    ids = [c.id for c in got[3].message.tool_calls + got[4].message.tool_calls]
    assert [c.name for c in got[4].message.tool_calls] == ["lookup", "convert"]
    assert all(ids) and len(set(ids)) == 3  # the model gives every call its own id
    assert got[5].text == "a message"
    assert got[6].text == "whole" and got[6].choices[0].finish_reason == "length"  # as given
    assert got[0].model == model.spec and model.spec.endswith("reply")


async def test_function_model_sees_the_request_and_its_errors_propagate() -> None:
    seen: list[ChatRequest] = []

    def reply(request: ChatRequest) -> str:
        seen.append(request)
        if request.messages[-1].content == "fail":
            raise ModelError("provider down")
        return "ok"

    model = FunctionModel(reply)
    await model.chat(_request(tools=SPECS, schema=Cat))
    assert seen[0].tools == SPECS and seen[0].response_schema == Cat.model_json_schema()
    with pytest.raises(ModelError, match="provider down"):
        await model.chat(_request(Message.user("fail")))
    three = await model.chat(_request(n=3))
    assert len(three.choices) == 3 and len(seen) == 5  # called once per sample


async def test_function_model_rejects_a_reply_it_cannot_read() -> None:
    model = FunctionModel(lambda request: 42)  # type: ignore[arg-type,return-value]
    with pytest.raises(UserError, match="returned int; a FunctionModel function returns a str"):
        await model.chat(_request())
    with pytest.raises(UserError, match="needs a function"):
        FunctionModel("not callable")  # type: ignore[arg-type]


def reply_from_module(request: ChatRequest) -> str:
    return f"{len(request.messages)} messages"


async def test_spec_strings_build_the_test_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_spec("test").scheme == "test"
    model = load_model("test")
    assert isinstance(model, TestModel) and model.spec == "test" and model.call_tools == "all"
    tuned = load_model("test:seed=3,call_tools=lookup+convert")
    assert isinstance(tuned, TestModel) and tuned.seed == 3 and tuned.call_tools == ["lookup", "convert"]
    assert isinstance(none := load_model("test:call_tools=none"), TestModel) and none.call_tools == "none"

    by_module = load_model(f"function:{__name__}:reply_from_module")
    assert isinstance(by_module, FunctionModel)
    assert (await by_module.chat(_request())).text == "1 messages"
    (tmp_path / "fakes.py").write_text("def reply(request):\n    return 'from a file'\n")
    monkeypatch.chdir(tmp_path)
    by_file = load_model("function:fakes.py:reply")
    assert (await by_file.chat(_request())).text == "from a file" and by_file.spec == "function:fakes.py:reply"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("test:temperature=1", "unknown option 'temperature=1'"),
        ("test:seed=x", "seed must be an integer"),
        ("function:nomodule", "expected function:MODULE:CALLABLE"),
        ("function:no_such_module_xyz:f", "cannot import no_such_module_xyz"),
        ("function:missing.py:f", "no such file missing.py"),
        (f"function:{__name__}:nothing_here", "has no callable named 'nothing_here'"),
    ],
)
def test_bad_test_model_specs_say_what_is_wrong(spec: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as info:
        load_model(spec)
    assert "\n" not in str(info.value)


def test_test_models_take_no_options() -> None:
    with pytest.raises(UserError, match="test models take no options"):
        load_model("test", timeout_s=3)


def test_both_are_chat_models_and_are_not_collected_as_tests() -> None:
    assert isinstance(TestModel(), ChatModel) and isinstance(FunctionModel(reply_from_module), ChatModel)
    assert TestModel.__test__ is False
    assert isinstance(ToolCall(id="x", name="y"), ToolCall)
