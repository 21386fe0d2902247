"""`ToolRegistry`: the tools one agent may call, and the one place a tool call is executed.

`execute` is the core loop of the tool layer: find the tool, replay from the journal if the call already
completed, otherwise have the budget admit it (`Budget.tool_call`: refused once a limit is reached, calls
in flight counted), validate and run it under its timeout and the budget's wall-clock limit, then charge
the budget and record a `tool.call` event. A model's mistake (unknown tool, bad JSON, invalid arguments, a failing tool) becomes a
`ToolResult(ok=False)` the model reads; only `BudgetExceeded`, replay misses and cancellation propagate.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Self

from agentflow.errors import UserError
from agentflow.events.kinds import ToolCalled
from agentflow.models.base import ToolCall, ToolSpec
from agentflow.tools.context import ToolContext
from agentflow.tools.decorator import Tool
from agentflow.tools.journal import ToolJournal
from agentflow.tools.packs import load_pack
from agentflow.tools.result import ToolResult, cap_text

EVENT_TEXT_CHARS = 2_000
"""How much of a result's text a `tool.call` event keeps."""


class ToolRegistry:
    """An ordered set of uniquely named tools."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._mcp: list[Any] = []  # McpHubs this registry started (stopped by `aclose`)
        for t in tools:
            self.add(t)

    @classmethod
    def from_packs(cls, packs: Sequence[str]) -> ToolRegistry:
        """All tools of the named packs (built-in names, dotted user modules or .py paths)."""
        return cls(t for pack in packs for t in load_pack(pack))

    def add(self, tool: Tool) -> None:
        existing = self._tools.get(tool.name)
        if existing is not None and existing is not tool:
            raise UserError(
                f"two tools are named {tool.name!r} (packs {existing.pack!r} and {tool.pack!r})",
                hint="give the MCP server a prefix: (e.g. prefix: gh_)"
                if "mcp:" in f"{existing.pack} {tool.pack}"
                else "load only one of them or rename one with @tool(name=...)",
            )
        self._tools[tool.name] = tool

    async def add_mcp(self, server: str | Mapping[str, Any], **options: Any) -> list[Tool]:
        """Add the tools of an MCP server (needs `agentflow[mcp]`): a stdio command line, an http(s)://
        URL or a mapping of `agentflow.mcp.McpServerConfig` fields; `options` are more such fields
        (`prefix=`, `allow=`, `block=`, `env=`, ...). The server starts now and runs until `aclose()`."""
        from agentflow.mcp.hub import McpHub

        if isinstance(server, str):
            key = "url" if server.strip().startswith(("http://", "https://")) else "command"
            server = {key: server}
        hub = McpHub([{**server, **options}])
        self._mcp.append(hub)
        added: list[Tool] = list(await hub.tools())
        for t in added:
            self.add(t)
        return added

    async def aclose(self) -> None:
        """Stop the MCP servers `add_mcp` started."""
        hubs, self._mcp = self._mcp, []
        for hub in hubs:
            await hub.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def subset(self, names: Iterable[str]) -> ToolRegistry:
        """A registry of only the named tools (an unknown name is a UserError)."""
        names = list(names)
        missing = [n for n in names if n not in self._tools]
        if missing:
            raise UserError(
                f"unknown tool(s) {', '.join(missing)}; available: {', '.join(self._tools) or 'none'}"
            )
        return ToolRegistry(self._tools[n] for n in names)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def specs(self) -> list[ToolSpec]:
        """Provider-neutral tool definitions, for `ChatRequest.tools`."""
        return [t.spec for t in self._tools.values()]

    def openai_tools(self) -> list[dict[str, Any]]:
        """The tools in OpenAI's chat-completions format, as the openai backend sends them (a copy)."""
        from agentflow.models.backends.openai_backend import to_openai_tools

        return copy.deepcopy(to_openai_tools(self.specs()))

    def anthropic_tools(self) -> list[dict[str, Any]]:
        """The tools in Anthropic's messages format, as the anthropic backend sends them (a copy)."""
        from agentflow.models.backends.anthropic_backend import to_anthropic_tools

        return copy.deepcopy(to_anthropic_tools(self.specs()))

    async def execute(
        self,
        call: ToolCall,
        ctx: ToolContext | None = None,
        *,
        journal: ToolJournal | None = None,
        key: str | None = None,
        node_id: str | None = None,
    ) -> ToolResult:
        """Run one tool call (or replay it from `journal` under `key`) and record it."""
        ctx = ctx if ctx is not None else ToolContext()
        replayable = journal is not None and key is not None
        result = await asyncio.to_thread(journal.get, key) if replayable else None  # type: ignore[union-attr,arg-type]
        if result is None:
            result = await self._run_charged(call, ctx)
            if replayable:
                await _record(journal, key, result)  # type: ignore[arg-type]
        else:
            result.replayed = True  # already charged by the run that did it
        if ctx.events is not None:
            text, _ = cap_text(result.text, EVENT_TEXT_CHARS)
            ctx.events.write(ToolCalled(
                node_id=node_id, name=call.name, call_id=call.id, args=call.arguments, ok=result.ok,
                error=result.error, duration_s=round(result.duration_s, 6), replayed=result.replayed, text=text,
                key=key,
            ))
        return result

    async def _run_charged(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        """Run the call held against the budget and cut at its wall-clock limit (`BudgetExceeded`)."""
        if ctx.budget is None:
            return await self._run(call, ctx)
        with ctx.budget.tool_call() as hold:
            async with ctx.budget.deadline():
                result = await self._run(call, ctx)
            hold.charge_tool()
        return result

    async def _run(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        if call.arguments_error is not None:
            return ToolResult.failure(
                f"the arguments of '{call.name}' are not valid JSON ({call.arguments_error}); "
                "send one JSON object with the tool's parameters",
                error="invalid JSON arguments",
            )
        tool = self._tools.get(call.name)
        if tool is None:
            return ToolResult.failure(
                f"there is no tool named '{call.name}'; available tools: {', '.join(self._tools) or 'none'}",
                error="unknown tool",
            )
        return await tool.run(call.arguments, ctx)


async def _record(journal: ToolJournal, key: str, result: ToolResult) -> None:
    """Journal a completed call: through the journal's own `aput` when it has one (the run ledger keeps the
    workspace there first), else its `put` off the event loop."""
    aput = getattr(journal, "aput", None)
    if aput is not None:
        await aput(key, result)
    else:
        await asyncio.to_thread(journal.put, key, result)
