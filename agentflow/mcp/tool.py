"""`McpTool`: a tool of an MCP server as an agentflow `Tool`, so the registry treats it like any `@tool`.

Its JSON schema (from `tools/list`) is exported to OpenAI/Anthropic like a native tool's; arguments are
validated against it on the host first, and a bad call comes back to the model in the same words as a
native tool's. The server's answer is untrusted text: only text is kept (images and binary resources
are named, not decoded), cut to `max_result_bytes`, and shown to the model capped to `max_result_chars`.
"""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING, Any

from agentflow.errors import ToolError
from agentflow.models.base import ToolSpec
from agentflow.tools.context import ToolContext
from agentflow.tools.decorator import Tool, _short
from agentflow.tools.result import ToolResult, cap_text
from agentflow.tools.schema import object_schema

if TYPE_CHECKING:
    from agentflow.mcp.connection import McpConnection

MAX_DESCRIPTION_CHARS = 2_000
"""Longest tool description taken from a server (it goes into every prompt that offers the tool)."""

PACK_PREFIX = "mcp:"
"""`Tool.pack` of an MCP tool is `mcp:<server name>`."""


def _no_call(**_: Any) -> Any:  # pragma: no cover - an McpTool runs through `run`, never through `fn`
    raise ToolError("an MCP tool is called through its registry")


class McpTool(Tool):
    """One tool of an MCP server, called through the server's shared `McpConnection`."""

    def __init__(self, connection: McpConnection, remote: Any) -> None:
        cfg = connection.config
        self.connection = connection
        self.remote_name: str = remote.name
        self.name = local_name(cfg.prefix, remote.name)
        self.fn = _no_call
        self.is_async = True
        self.timeout = cfg.call_timeout_s
        self.max_chars = cfg.max_result_chars
        self.args_model = None  # type: ignore[assignment]  # validated with the server's JSON schema instead
        self.context_param = None
        self._param_names = {}
        self.description = (remote.description or remote.title or remote.name).strip()[:MAX_DESCRIPTION_CHARS]
        self.pack = PACK_PREFIX + connection.name
        self.schema = object_schema(dict(remote.input_schema or {}))
        self.spec = ToolSpec(name=self.name, description=self.description, parameters=self.schema)
        self._validator = _validator(self.schema)

    def __repr__(self) -> str:
        return f"McpTool({self.name!r}, server={self.connection.name!r})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise ToolError(f"MCP tool {self.name!r} is called with `await tool.run(arguments)`")

    def validate(self, arguments: dict[str, Any]) -> Any:
        """The arguments, checked against the server's schema; raises `ValueError` naming the problems."""
        problems = self.problems(arguments)
        if problems:
            raise ValueError("; ".join(problems))
        return dict(arguments)

    def problems(self, arguments: dict[str, Any]) -> list[str]:
        """What is wrong with `arguments` against the tool's schema (empty when they are valid)."""
        found = []
        for err in sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.path))[:6]:
            loc = ".".join(str(p) for p in err.path)
            if err.validator == "required":
                missing = re.findall(r"'([^']+)' is a required property", err.message)
                found.append(f"'{'.'.join([loc, *missing]) if loc else ''.join(missing)}' is required")
            elif err.validator == "additionalProperties":
                extra = re.findall(r"'([^']+)'", err.message.split("(")[-1])
                found += [f"'{name}' is not a parameter of this tool" for name in extra]
            else:
                found.append(f"'{loc or '(arguments)'}': {err.message} (got {_short(err.instance)})")
        return found

    async def run(
        self, arguments: dict[str, Any], ctx: ToolContext | None = None, *, timeout: float | None = None
    ) -> ToolResult:
        """Validate on the host, call the server under the timeout, keep the (capped) text of its answer."""
        start = time.monotonic()
        problems = self.problems(arguments)
        if problems:
            result = self.invalid_arguments(problems[:5])
        else:
            limit = timeout if timeout is not None else self.timeout
            try:
                answer = await self.connection.call_tool(self.remote_name, arguments, limit)
                result = self.to_result(answer)
            except ToolError as exc:
                result = ToolResult.failure(str(exc), error=type(exc).__name__)
        result.duration_s = time.monotonic() - start
        return result

    def to_result(self, answer: Any) -> ToolResult:
        """The SDK's `CallToolResult` as a `ToolResult`: untrusted text, size-capped."""
        limit = self.connection.config.max_result_bytes
        text = _bounded(content_text(answer.content), limit)
        data: dict[str, Any] = {"server": self.connection.name}
        structured = answer.structured_content
        if structured is not None:
            encoded = json.dumps(structured, ensure_ascii=False, default=str)
            if len(encoded.encode("utf-8", "replace")) <= limit:
                data["structured"] = structured
            else:
                data["structured_dropped_bytes"] = len(encoded)
            if not text:
                text = _bounded(encoded, limit)
        if answer.is_error:
            return ToolResult.failure(f"tool '{self.name}' failed on its server: {text or '(no message)'}",
                                      error="mcp tool error", **data)
        capped, cut = cap_text(text or "(no output)", self.max_chars)
        if cut:
            data.update(full_text=text, cut_chars=cut)
        return ToolResult(text=capped, data=data)


def local_name(prefix: str, remote: str) -> str:
    """The registry name of remote tool `remote`: prefixed, then cut to what OpenAI and Anthropic accept."""
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", f"{prefix}{remote}")
    return name[:64] or "mcp_tool"


def content_text(blocks: list[Any]) -> str:
    """Text of a result's content blocks; non-text blocks are named, never decoded or run."""
    parts: list[str] = []
    for block in blocks or []:
        kind = getattr(block, "type", "?")
        if kind == "text":
            parts.append(str(block.text))
        elif kind == "resource":
            res = block.resource
            body = getattr(res, "text", None)
            parts.append(str(body) if body is not None else f"[binary resource {res.uri}: not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {getattr(block, 'uri', '?')}]")
        else:
            mime = getattr(block, "mime_type", None) or "unknown type"
            parts.append(f"[{kind} content ({mime}): not shown]")
    return "\n".join(parts)


def _bounded(text: str, limit: int) -> str:
    raw = text.encode("utf-8", "replace")
    if len(raw) <= limit:
        return text
    kept = raw[:limit].decode("utf-8", "ignore")
    return kept + f"\n[... {len(raw) - limit} more bytes from the MCP server dropped ...]"


def _validator(schema: dict[str, Any]) -> Any:
    from jsonschema import validators

    cls = validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except Exception:  # noqa: BLE001 - a server's broken schema: validate against the permissive draft
        cls = validators.validator_for({})
        schema = {"type": "object"}
    return cls(schema)
