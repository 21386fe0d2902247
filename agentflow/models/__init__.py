"""Model backends behind one async chat interface, chosen by spec string (`load_model`).

Public names resolve lazily so that importing this package pulls in no provider SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentflow._lazy import lazy_getattr

_MODULES: dict[str, tuple[str, ...]] = {
    "agentflow.models.base": (
        "ChatModel", "ChatRequest", "ChatResponse", "Choice", "Message", "StreamDelta", "ToolCall", "ToolSpec", "Usage",
    ),
    "agentflow.models.options": ("ModelOptions",),
    "agentflow.models.spec": ("load_model", "served_model", "parse_spec"),
    "agentflow.models.replay": ("ReplayModel", "RecordingModel"),
    "agentflow.models.cache": ("CachedModel",),
    "agentflow.models.instrumented": ("InstrumentedModel",),
    "agentflow.models.structured": ("chat_structured", "StructuredOutputError"),
    "agentflow.models.testing": ("FunctionModel", "TestModel", "tool_call"),
}
_LAZY: dict[str, str] = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:  # pragma: no cover
    from agentflow.models.base import (
        ChatModel,
        ChatRequest,
        ChatResponse,
        Choice,
        Message,
        StreamDelta,
        ToolCall,
        ToolSpec,
        Usage,
    )
    from agentflow.models.cache import CachedModel
    from agentflow.models.instrumented import InstrumentedModel
    from agentflow.models.options import ModelOptions
    from agentflow.models.replay import RecordingModel, ReplayModel
    from agentflow.models.spec import load_model, parse_spec, served_model
    from agentflow.models.structured import StructuredOutputError, chat_structured
    from agentflow.models.testing import FunctionModel, TestModel, tool_call


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


__all__ = ["CachedModel", "ChatModel", "ChatRequest", "ChatResponse", "Choice", "FunctionModel", "InstrumentedModel",
           "Message", "ModelOptions", "RecordingModel", "ReplayModel", "StreamDelta", "StructuredOutputError",
           "TestModel", "ToolCall", "ToolSpec", "Usage", "chat_structured", "load_model", "parse_spec", "served_model",
           "tool_call"]
