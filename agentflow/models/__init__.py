"""Model backends behind one async chat interface, chosen by spec string (`load_model`).

Public names resolve lazily so that importing this package pulls in no provider SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentflow._lazy import lazy_getattr

_LAZY: dict[str, str] = {
    "ChatModel": "agentflow.models.base",
    "ChatRequest": "agentflow.models.base",
    "ChatResponse": "agentflow.models.base",
    "Choice": "agentflow.models.base",
    "Message": "agentflow.models.base",
    "StreamDelta": "agentflow.models.base",
    "ToolCall": "agentflow.models.base",
    "ToolSpec": "agentflow.models.base",
    "Usage": "agentflow.models.base",
    "ModelOptions": "agentflow.models.options",
    "load_model": "agentflow.models.spec",
    "served_model": "agentflow.models.spec",
    "parse_spec": "agentflow.models.spec",
    "ReplayModel": "agentflow.models.replay",
    "RecordingModel": "agentflow.models.replay",
    "CachedModel": "agentflow.models.cache",
    "InstrumentedModel": "agentflow.models.instrumented",
    "chat_structured": "agentflow.models.structured",
    "StructuredOutputError": "agentflow.models.structured",
    "FunctionModel": "agentflow.models.testing",
    "TestModel": "agentflow.models.testing",
    "tool_call": "agentflow.models.testing",
}

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


__all__ = [
    "CachedModel",
    "ChatModel",
    "ChatRequest",
    "ChatResponse",
    "Choice",
    "FunctionModel",
    "InstrumentedModel",
    "Message",
    "ModelOptions",
    "RecordingModel",
    "ReplayModel",
    "StreamDelta",
    "StructuredOutputError",
    "TestModel",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "chat_structured",
    "load_model",
    "parse_spec",
    "served_model",
    "tool_call",
]
