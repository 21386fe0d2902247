"""What a served model can do, so agents pick a prompt style and an edit format that work with it."""

from __future__ import annotations

from typing import Literal

from agentflow.config import StrictConfig


class ModelProfile(StrictConfig):
    """Capabilities of a model as served (by llama-server or vLLM)."""

    mode: Literal["chat", "completion"] = "chat"
    """`chat`: send messages to /v1/chat/completions; `completion`: render a few-shot text prompt for
    /v1/completions (base models without an instruction template)."""
    tool_calling: bool = False
    """Native tool calls work (the server parses the model's tool-call syntax into `tool_calls`)."""
    guided_json: bool = False
    """The server can constrain output to a JSON schema (`response_format` / grammar)."""
    edit_format: Literal["tool_calls", "json", "diff", "whole"] = "diff"
    """The edit format agents should ask this model for: native tool calls, a JSON object (guided),
    a unified diff, or the whole file."""


def default_profile(tool_calling: bool = False) -> ModelProfile:
    """Profile of an arbitrary served chat model: JSON output is guided by both servers; tool calls only
    when the server was started with a tool-call parser."""
    return ModelProfile(mode="chat", tool_calling=tool_calling, guided_json=True,
                        edit_format="tool_calls" if tool_calling else "json")
