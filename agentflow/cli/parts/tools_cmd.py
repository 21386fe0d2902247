"""`agentflow tools`: list the tools of packs and call one by hand."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from agentflow.cli.common import JSON_OPTION, parse_json_input, print_json

if TYPE_CHECKING:
    from agentflow.tools.registry import ToolRegistry
    from agentflow.tools.result import ToolResult

PACK_OPTION = typer.Option(
    None, "--pack", "-p", help="A built-in tool pack to load (repeatable); default: every built-in pack."
)
USER_TOOLS_OPTION = typer.Option(
    None, "--tools", "-t", help="A user module (my_pkg.tools) or .py file of @tool functions (repeatable)."
)

MCP_OPTION = typer.Option(
    None,
    "--mcp",
    help="An MCP server: a stdio command line (quoted) or an http(s):// URL (repeatable; needs agentflow[mcp]).",
)


def _registry(packs: list[str] | None, user: list[str] | None, mcp: list[str] | None = None) -> ToolRegistry:
    from pathlib import Path

    from agentflow.graph.define.user_code import localize_pack
    from agentflow.tools.packs import available_packs
    from agentflow.tools.registry import ToolRegistry

    names = list(packs or [])
    if not names and not user and not mcp:
        names = available_packs()
    # `-t mytools` finds mytools.py in the current folder, which is not on sys.path under the console script
    return ToolRegistry.from_packs([*names, *(localize_pack(u, Path.cwd()) for u in user or [])])


async def _with_mcp(registry: ToolRegistry, servers: list[str] | None) -> None:
    for server in servers or []:
        await registry.add_mcp(server)


def register(app: typer.Typer) -> None:
    sub = typer.Typer(help="Inspect and try tool packs.", no_args_is_help=True)
    app.add_typer(sub, name="tools")

    @sub.command("list")
    def list_tools(
        pack: list[str] = PACK_OPTION,
        tools: list[str] = USER_TOOLS_OPTION,
        mcp: list[str] = MCP_OPTION,
        as_json: bool = JSON_OPTION,
    ) -> None:
        """List tools: name, pack and one-line description (--json: their full JSON schemas)."""
        import asyncio

        registry = _registry(pack, tools, mcp)

        async def list_mcp() -> None:
            async with registry:  # the servers are stopped once listed
                await _with_mcp(registry, mcp)

        if mcp:
            asyncio.run(list_mcp())
        if as_json:
            print_json([{"pack": t.pack, **t.spec.model_dump()} for t in registry])
            return
        if not len(registry):
            typer.echo("(no tools)")
            return
        width = max(len(t.name) for t in registry)
        pack_width = max(len(t.pack) for t in registry)
        for t in registry:
            typer.echo(f"{t.name:<{width}}  {t.pack:<{pack_width}}  {t.summary}".rstrip())

    @sub.command("call")
    def call_tool(
        name: str = typer.Argument(..., help="Tool name, as shown by 'agentflow tools list'."),
        input: str = typer.Option("{}", "--input", "-i", help="Arguments as inline JSON or @file.json."),
        sandbox: str = typer.Option(
            "none",
            "--sandbox",
            help="Run in a fresh sandbox, removed afterwards: none, local, docker or auto.",
        ),
        pack: list[str] = PACK_OPTION,
        tools: list[str] = USER_TOOLS_OPTION,
        mcp: list[str] = MCP_OPTION,
        as_json: bool = JSON_OPTION,
    ) -> None:
        """Call one tool outside any run and print its result; exit 1 if the tool failed."""
        import asyncio

        from agentflow.errors import UserError
        from agentflow.models.base import ToolCall
        from agentflow.tools.context import ToolContext

        if sandbox not in ("none", "local", "docker", "auto"):
            raise UserError(f"--sandbox {sandbox!r} is not one of none, local, docker, auto")
        registry = _registry(pack, tools, mcp)
        call = ToolCall(id="cli", name=name, arguments=parse_json_input(input))

        async def run_call() -> ToolResult:
            async with registry:
                await _with_mcp(registry, mcp)
                if name not in registry:
                    raise UserError(
                        f"unknown tool {name!r}", hint="see 'agentflow tools list' for the tool names"
                    )
                if sandbox == "none":
                    return await registry.execute(call, ToolContext())
                from agentflow.sandbox import open_sandbox

                async with open_sandbox(sandbox) as sb:  # type: ignore[arg-type]
                    return await registry.execute(call, ToolContext(sandbox=sb))

        result = asyncio.run(run_call())
        if as_json:
            print_json(result.model_dump(mode="json"))
        else:
            typer.echo(result.text)
        if not result.ok:
            raise typer.Exit(1)
