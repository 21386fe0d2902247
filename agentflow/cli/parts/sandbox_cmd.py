"""`agentflow sandbox build|prune|exec`: the sandbox image and leftovers."""

from __future__ import annotations

import typer

from agentflow.cli.common import CONFIG_OPTION, JSON_OPTION, print_json
from agentflow.errors import UserError


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        help="Build the sandbox image, remove leftovers, run a command in a sandbox.", no_args_is_help=True
    )
    app.add_typer(sub, name="sandbox")

    @sub.command("build")
    def build(
        offline: bool = typer.Option(
            False, "--offline", help="Force the offline path (debootstrap + docker import)."
        ),
        dockerfile: bool = typer.Option(
            False, "--dockerfile", help="Force the Dockerfile path (needs a registry)."
        ),
        force: bool = typer.Option(
            False, "--force", help="Rebuild even if the image (or cached rootfs) exists."
        ),
        mirror: str = typer.Option(
            None, "--mirror", help="Debian mirror for the offline path (default: apt's)."
        ),
        tag: str = typer.Option(None, "--tag", help="Image tag (default: agentflow-sandbox:<version>)."),
    ) -> None:
        """Build the sandbox base image (Dockerfile when a registry answers, offline otherwise)."""
        from agentflow.sandbox.config import DEFAULT_IMAGE
        from agentflow.sandbox.image import build_image, image_exists

        if offline and dockerfile:
            raise UserError("--offline and --dockerfile exclude each other: pick one")
        method = "offline" if offline else "dockerfile" if dockerfile else "auto"
        tag = tag or DEFAULT_IMAGE
        if image_exists(tag) and not force:
            typer.echo(f"{tag} already exists (use --force to rebuild)")
            return
        used = build_image(method, tag, mirror=mirror, force=force)  # type: ignore[arg-type]
        typer.echo(f"built {tag} ({used})")

    @sub.command("prune")
    def prune_cmd(
        everything: bool = typer.Option(
            False, "--all", help="Also remove sandboxes of runs still going (default: only orphans)."
        ),
        json_out: bool = JSON_OPTION,
    ) -> None:
        """Remove sandbox containers and store volumes whose owner process is gone (all of them with --all)."""
        from agentflow.sandbox.docker import prune

        removed = prune(everything=everything)
        if json_out:
            print_json({"removed": removed})
        else:
            typer.echo(f"removed {len(removed)} leftover(s)" + (": " + ", ".join(removed) if removed else ""))

    @sub.command("exec")
    def exec_cmd(
        command: str = typer.Argument(..., help="Bash command to run in a fresh sandbox."),
        backend: str = typer.Option("auto", "--sandbox", help="docker, local or auto."),
        config: list[str] = CONFIG_OPTION,
        timeout: float = typer.Option(None, "--timeout", help="Seconds before the command is killed."),
        json_out: bool = JSON_OPTION,
    ) -> None:
        """Run one command in a fresh sandbox and print its output (for debugging)."""
        import asyncio

        from agentflow.config import load_config
        from agentflow.sandbox import open_sandbox
        from agentflow.sandbox.config import SandboxConfig

        cfg = load_config(SandboxConfig, config or [])

        async def go() -> object:
            async with open_sandbox(backend, cfg) as sb:  # type: ignore[arg-type]
                return await sb.exec(command, timeout=timeout)

        res = asyncio.run(go())
        if json_out:
            print_json(res.model_dump())  # type: ignore[attr-defined]
        else:
            typer.echo(res.output, nl=False)  # type: ignore[attr-defined]
        raise typer.Exit(res.exit_code)  # type: ignore[attr-defined]
