"""`agentflow mcp serve`: serve agentflow's sandboxed tools to any MCP client."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    sub = typer.Typer(help="Model Context Protocol: serve agentflow's sandboxed tools.", no_args_is_help=True)
    app.add_typer(sub, name="mcp")

    @sub.command("serve")
    def serve_command(
        workspace: Path = typer.Argument(..., help="Folder copied into the sandbox the tools act on."),
        http: bool = typer.Option(False, "--http", help="Streamable HTTP on 127.0.0.1 instead of stdio."),
        port: int = typer.Option(8765, "--port", help="Port of --http."),
        host: str = typer.Option("127.0.0.1", "--host", help="Address of --http (loopback only)."),
        sandbox: str = typer.Option(
            "docker", "--sandbox", help="docker (hardened, no network) or local (no isolation)."
        ),
        pack: list[str] = typer.Option(
            None, "--pack", "-p", help="Tool packs to serve (default: shell, editor, search, patch, tests)."
        ),
        workflow: list[str] = typer.Option(
            None, "--workflow", help="A workflow file run_workflow may run besides the shipped ones (repeatable)."
        ),
        model: str = typer.Option(
            None, "--model", "-m", help="Model of repair and run_workflow (the server's choice, not the client's)."
        ),
        allow_model: list[str] = typer.Option(
            None, "--allow-model", help="A further model spec clients may name in repair/run_workflow (repeatable)."
        ),
        token_file: Path = typer.Option(
            None, "--token-file", help="Where --http writes its bearer token (default RUNS/mcp-token)."
        ),
        runs: Path = typer.Option(Path("runs"), "--runs", help="Folder of the server's events and job runs."),
        sandbox_timeout: float = typer.Option(
            8 * 3600.0, "--sandbox-timeout", help="Seconds the sandbox lives (then restart the server)."
        ),
    ) -> None:
        """Serve the tool packs, workspace_diff, repair and run_workflow over MCP (stdio unless --http).

        Over --http every request needs `Authorization: Bearer TOKEN`; the token comes from
        AGENTFLOW_MCP_TOKEN or is generated, and is written to --token-file (mode 0600)."""
        import asyncio

        from agentflow.config import validate_config
        from agentflow.mcp_server.config import McpServeConfig
        from agentflow.mcp_server.server import serve

        data = {
            "workspace": str(workspace), "transport": "http" if http else "stdio", "port": port, "host": host,
            "sandbox": sandbox, "workflows": list(workflow or []), "model": model, "runs": str(runs),
            "allowed_models": list(allow_model or []),
            "token_file": str(token_file) if token_file else None, "sandbox_timeout_s": sandbox_timeout,
        }
        if pack:
            data["packs"] = list(pack)
        cfg = validate_config(McpServeConfig, data, source="agentflow mcp serve")
        try:
            asyncio.run(serve(cfg))
        except KeyboardInterrupt:
            pass
