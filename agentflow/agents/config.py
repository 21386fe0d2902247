"""`AgentConfig`: what an agent is made of (model spec, prompt template, tool packs, output schema, limits)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field, PlainSerializer, WithJsonSchema

from agentflow._modules import import_object
from agentflow.agents.context import ContextConfig
from agentflow.agents.loops import LoopGuardConfig
from agentflow.config import StrictConfig
from agentflow.errors import ConfigError, UserError

ToolProtocol = Literal["auto", "native", "text"]


def _schema_class(value: Any) -> Any:
    """The class itself (from Python), or the pydantic model class a `module:Class` (or `module.Class`) string
    names (from YAML or `-c`), resolved here once; anything else is a one-line `ConfigError`."""
    if isinstance(value, str):
        try:
            cls = import_object(value, kind="pydantic model",
                                expected="'module:Class', e.g. agentflow.agents.schemas:Plan")
        except UserError as exc:  # a config error: the agent's config names it
            raise ConfigError(f"output_schema: {exc}") from None
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
            raise ConfigError(f"output_schema {value!r}: not a pydantic model class")
        return cls
    if value is None or (isinstance(value, type) and issubclass(value, BaseModel)):
        return value
    raise ConfigError(f"output_schema {value!r}: expected a pydantic model class or 'module:Class'")


OutputSchema = Annotated[
    type[BaseModel] | None,
    BeforeValidator(_schema_class),
    PlainSerializer(lambda cls: f"{cls.__module__}:{cls.__qualname__}" if cls is not None else None,
                    return_type=str | None, when_used="json"),
    WithJsonSchema({"type": ["string", "null"], "description": "module:Class of a pydantic model"}),
]
"""A pydantic model class; `module:Class` in text (YAML, `-c`, a config dumped as JSON)."""


class AgentConfig(StrictConfig):
    """One agent: a configured model, a prompt template, tools and an output schema, with its limits."""

    name: str = "agent"
    """Name used in events and as the default state key when the agent is a graph node."""
    model: str = "local:qwen2.5-coder-1.5b"
    """Model spec string, e.g. `openai:gpt-4o-mini`, `anthropic:claude-3-5-haiku-latest`, `replay:PATH`."""
    prompt: str = "generic"
    """Prompt template name: `<prompt>.system.md` and `<prompt>.task.md` are rendered with jinja2."""
    prompt_dirs: list[str] = Field(default_factory=list)
    """Folders searched for prompt templates before the built-in ones (to override or add prompts)."""
    tools: list[str] = Field(default_factory=list)
    """Tool packs the agent may call: built-in pack names (`shell`, `editor`, ...) or importable modules."""
    output_schema: OutputSchema = None
    """The pydantic model class the final answer must follow (`AgentConfig(output_schema=Plan)`); in YAML or a
    `-c` override its import path `module:Class`, resolved to the class when the config is read; None for free
    text."""
    step_limit: int = Field(default=30, ge=1)
    """Maximum number of model calls in one run."""
    wall_time_s: float | None = Field(default=None, gt=0)
    """Wall-clock limit of one run in seconds; None for no limit beyond the shared budget's."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Maximum tokens of each model reply."""
    temperature: float | None = Field(default=None, ge=0)
    """Sampling temperature; None for the backend's default."""
    tool_protocol: ToolProtocol = "auto"
    """How tools are called: `native` (the API's tool calling), `text` (fenced ```tool blocks in the reply,
    for models without tool calling) or `auto` (native unless the model says it has no tool calling)."""
    structured_output: bool = False
    """Send the output schema as `response_schema` (for backends with structured output); the reply is
    parsed as JSON either way."""
    output_retries: int = Field(default=1, ge=0)
    """How many times an unparseable final answer is sent back to the model with the parse error."""
    approve_tools: list[str] = Field(default_factory=list)
    """Tools whose every call waits for a human's approval (`*` for all): in a workflow run the run pauses
    showing the exact call, and the approval runs exactly that call (see `agentflow.agents.approval`)."""
    context: ContextConfig = Field(default_factory=ContextConfig)
    """The model's context window (default: what the model declares) and how the conversation is compacted to
    stay within it; see `agentflow.agents.context`."""
    loop_guard: LoopGuardConfig = Field(default_factory=LoopGuardConfig)
    """When the agent counts as repeating itself (same tool call and result, same failure, same answer) and
    what then happens (`nudge`, `stop` with `stop_reason: loop`, or `end_branch`); see `agentflow.agents.loops`."""

