"""Every agent-node option is used or is a validation problem; a node can have its own model; the Python
builder takes Tool objects, ChatModel instances and pydantic classes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

from pydantic import BaseModel

from agentflow.graph import END, RunHandles, Workflow, WorkflowRunner, spec_from_dict, validate
from agentflow.models.replay import ReplayModel
from agentflow.tools import tool


def _spec(node: dict[str, Any]) -> Any:
    return spec_from_dict({"name": "w", "state": {"task": {"type": "str"}, "out": {"type": "dict"}},
                           "nodes": {"a": {"agent": "critic", "output": "out", "next": "END", **node}}})


def _problems(node: dict[str, Any]) -> list[str]:
    return [str(p) for p in validate(_spec(node))]


def test_option_typos_are_problems() -> None:
    assert _problems({"args": {"input": "task", "config": {"tools": []}}}) == []
    (typo,) = _problems({"args": {"inptu": "task"}})
    assert "unknown option 'inptu'" in typo and "\n" not in typo
    (config,) = _problems({"args": {"config": {"max_tokenz": 5}}})
    assert "max_tokenz" in config
    both = _problems({"args": {"inptu": "task", "config": {"max_tokenz": 5}}})  # every problem, one line each
    assert len(both) == 2 and "inptu" in both[0] and "max_tokenz" in both[1]
    (pack,) = _problems({"args": {"config": {"tools": ["no_such_pack"]}}})
    assert "no_such_pack" in pack
    (model,) = _problems({"args": {"model": "gpt4"}})
    assert "model" in model
    (role,) = _problems({"agent": "no_such_role"})
    assert "no_such_role" in role


def test_options_on_the_wrong_kind_of_node_are_problems() -> None:
    spec = spec_from_dict({"name": "w", "nodes": {
        "a": {"fn": "agentflow.workflows.demo:prepare", "args": {"x": 1}, "output": "y", "next": "b"},
        "b": {"fn": "agentflow.workflows.demo:outline", "on_error": "a", "next": "END"},
    }})
    text = " | ".join(str(p) for p in validate(spec))
    assert "node 'a': args applies" in text and "node 'a': output applies" in text
    assert "node 'b': on_error applies to agent nodes only" in text
    (unknown,) = _problems({"on_error": "nowhere", "args": {"config": {"tools": []}}})
    assert "on_error refers to unknown node 'nowhere'" in unknown


def _script(tmp_path: Path, name: str, replies: list[Any]) -> ReplayModel:
    inter = []
    for r in replies:
        msg = {"role": "assistant", "content": r} if isinstance(r, str) else {"role": "assistant", "content": None,
                                                                                  "tool_calls": r}
        inter.append({"response": {"choices": [{"message": msg, "finish_reason": "stop"}],
                                   "usage": {"input_tokens": 5, "output_tokens": 5}}})
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "match": "sequence", "interactions": inter}))
    return ReplayModel(path)


class Haiku(BaseModel):
    lines: list[str]


class PoemState(TypedDict, total=False):
    task: str
    poem: dict


async def test_builder_takes_objects_and_a_node_model_wins(tmp_path: Path) -> None:
    seen: list[str] = []

    @tool
    def count_words(text: str) -> int:
        """Count words.

        Args:
            text: the text.
        """
        seen.append(text)
        return len(text.split())

    node_model = _script(tmp_path, "node.json", [
        [{"id": "c1", "name": "count_words", "arguments": {"text": "an old silent pond"}}],
        json.dumps({"lines": ["an old silent pond", "a frog jumps in", "splash"]}),
    ])
    run_model = _script(tmp_path, "run.json", [])  # must not be called: the node names its own model
    wf = Workflow("poem", state=PoemState)
    wf.agent("write", "critic", output="poem", input="task", model=node_model, tools=[count_words],
             output_type=Haiku, config={"tools": []})
    wf.edge("write", END)
    assert validate(wf.spec) == []
    async with WorkflowRunner(wf.spec, run_dir=tmp_path / "r", context=RunHandles(chat_model=run_model)) as runner:
        result = await runner.start({"task": "a haiku"})
    assert result.status == "done", result.errors
    assert result.state["poem"]["lines"][2] == "splash"
    assert seen == ["an old silent pond"]
    assert run_model.remaining == 0 and node_model.remaining == 0


def test_an_unknown_workflow_tool_pack_is_a_problem() -> None:
    spec = spec_from_dict({"name": "w", "tools": ["calc", "no_such_pack"],
                           "nodes": {"a": {"fn": "agentflow.workflows.demo:prepare", "next": "END"}}})
    (problem,) = [str(p) for p in validate(spec)]
    assert "no_such_pack" in problem
